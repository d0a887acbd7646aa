package accounts

import (
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/model"
)

// The refusals of the use cases. A surface maps each to its answer (the API's status and code, the
// portal's page, the CLI's message); anything else is internal.
var (
	// ErrNotFound: no account with that owner e-mail, or no API key with that id.
	ErrNotFound = model.ErrNotFound
	// ErrUnauthorized: a missing, malformed, unknown or revoked API key.
	ErrUnauthorized = model.ErrUnauthorized
	// ErrPortalOff: the portal is turned off (WEBHOOKD_PORTAL=false); a link would open nothing.
	ErrPortalOff = errors.New("the portal is turned off")
	// ErrPortalTTLOutOfRange: a link's ttl not more than 0, or over MaxPortalLinkTTL.
	ErrPortalTTLOutOfRange = fmt.Errorf("portal link ttl must be more than 0 and at most %s", MaxPortalLinkTTL)
	// ErrLinkInvalid: a forged, expired or revoked portal link (who holds it proved nothing).
	ErrLinkInvalid = model.ErrPortalTokenInvalid
	// ErrLinkUsed: a genuine link opened before; a link opens once.
	ErrLinkUsed = model.ErrPortalTokenUsed
	// ErrSessionEnded: an unknown, expired, revoked or signed-out portal session.
	ErrSessionEnded = model.ErrPortalSessionEnded
)

// ScopeError refuses an API key's scope that is not one of model.KeyScopes.
type ScopeError struct {
	Scope model.KeyScope
}

func (e *ScopeError) Error() string {
	return fmt.Sprintf("api key scope %q is not one of read, publish, manage", e.Scope)
}

// VariantError refuses a portal link for a variant that does not exist.
type VariantError struct {
	Variant model.Variant
}

func (e *VariantError) Error() string {
	return fmt.Sprintf("portal link: unknown variant %q", e.Variant)
}

// DefaultPortalLinkTTL and MaxPortalLinkTTL bound how long a link may wait to be opened: the ttl
// is how long it may sit in an e-mail or a page (a session lasts model.PortalSessionTTL from its
// opening, whatever the link's ttl).
const (
	DefaultPortalLinkTTL = time.Hour
	MaxPortalLinkTTL     = 24 * time.Hour
)
