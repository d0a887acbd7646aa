// Package accounts holds the use cases of who may call webhookd and who may open the owner's
// portal: an account and its API keys (issue, list, revoke, authenticate a request's key) and an
// account's portal access (issue a signed single-use link, exchange it for a session, look a
// session up, end it, end them all). The REST API, the portal and the operator's CLI call a
// Service method and word its refusals (errors.go) their own way; model keeps the rows, the
// queries and the tokens' hashing and comparison.
package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
)

// Config carries the use cases' dependencies. Its values come from cmd/webhookd's Config.
type Config struct {
	DB *model.DB
	// PublicURL is where clients reach the server (WEBHOOKD_PUBLIC_URL): a portal link points
	// there. Empty makes links relative.
	PublicURL string
	// PortalOff refuses every portal link (WEBHOOKD_PORTAL=false): it would open nothing.
	PortalOff bool
}

// Service runs the use cases.
type Service struct {
	db        *model.DB
	publicURL string
	portalOff bool
}

// New checks cfg and builds the Service.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("accounts: DB is required")
	}
	return &Service{db: cfg.DB, publicURL: cfg.PublicURL, portalOff: cfg.PortalOff}, nil
}

// CreateAPIKey issues a new key of that scope for the account with that owner e-mail, creating the
// account when it does not exist yet: a *ScopeError when scope is not one of model.KeyScopes. The
// plain key is returned once and never stored. The audit log records it in the same transaction.
func (s *Service) CreateAPIKey(ctx context.Context, ownerEmail, name string, scope model.KeyScope) (plain string, account *model.Account, err error) {
	if !scope.Valid() {
		return "", nil, &ScopeError{Scope: scope}
	}
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if plain, account, err = model.CreateScopedAPIKey(ctx, tx, ownerEmail, name, scope); err != nil {
			return err
		}
		keys, err := model.ListAPIKeys(ctx, tx, account.OwnerEmail)
		if err != nil {
			return err
		}
		lookup := model.APIKeyLookup(plain)
		for _, k := range keys {
			if k.Lookup == lookup {
				return audit.Record(ctx, tx, account.ID, model.AccountWide, audit.APIKeyCreate, audit.TargetAPIKey, audit.ID(k.ID),
					audit.Changes{"name": audit.Changed(nil, name), "scope": audit.Changed(nil, string(scope))})
			}
		}
		return errors.New("accounts: the new API key is not among the account's")
	})
	if err != nil {
		return "", nil, err
	}
	return plain, account, nil
}

// APIKeys lists the keys of the account with that owner e-mail, revoked ones too, oldest first;
// ErrNotFound when there is no such account.
func (s *Service) APIKeys(ctx context.Context, ownerEmail string) ([]model.APIKey, error) {
	return model.ListAPIKeys(ctx, s.db, ownerEmail)
}

// RevokeAPIKey revokes the key with that id: from its next request on it is ErrUnauthorized. With
// it go the unused portal links it asked for and the sessions they opened (a leaked key may have
// made them already); what it ended of the portal is returned. ErrNotFound when there is no key
// with that id.
func (s *Service) RevokeAPIKey(ctx context.Context, id int64) (key *model.APIKey, ended model.PortalRevoked, err error) {
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		asked := model.Now()
		if key, ended, err = model.RevokeAPIKey(ctx, tx, id); err != nil {
			return err
		}
		if key.RevokedAt.Before(asked) {
			return nil // revoked before: nothing changed
		}
		return audit.Record(ctx, tx, key.AccountID, model.AccountWide, audit.APIKeyRevoke, audit.TargetAPIKey, audit.ID(key.ID),
			audit.Changes{"revoked": audit.Changed(false, true)})
	})
	if err != nil {
		return nil, model.PortalRevoked{}, err
	}
	return key, ended, nil
}

// Authenticate returns the account a request's plain API key belongs to and the key's id (what it
// makes, such as a portal link, records) and scope (what it may do), or ErrUnauthorized.
func (s *Service) Authenticate(ctx context.Context, plain string) (*model.Account, model.AuthenticatedKey, error) {
	return model.Authenticate(ctx, s.db, plain)
}

// Account loads the account with that owner e-mail, or ErrNotFound.
func (s *Service) Account(ctx context.Context, ownerEmail string) (*model.Account, error) {
	return model.AccountByEmail(ctx, s.db, ownerEmail)
}

// PortalOn is ErrPortalOff when the portal is turned off, so that a surface may refuse a link
// before it reads the request.
func (s *Service) PortalOn() error {
	if s.portalOff {
		return ErrPortalOff
	}
	return nil
}

// PortalLinkRequest asks for a link to the portal of an account's webhooks of one variant.
type PortalLinkRequest struct {
	AccountID int64
	// APIKeyID is the key that asks (POST <prefix>/portal-sessions); 0 for an operator
	// (webhookd portal-link). Revoking the key revokes the link and ends the session it opened.
	APIKeyID int64
	Variant  model.Variant
	// ReadOnly: the session sees everything and changes nothing.
	ReadOnly bool
	// TTL is how long the link may wait to be opened: nil is DefaultPortalLinkTTL; given, it is
	// more than 0 and at most MaxPortalLinkTTL (ErrPortalTTLOutOfRange).
	TTL *time.Duration
}

// PortalLink is an issued link: the URL a person opens, shown once, and its stored half.
type PortalLink struct {
	URL  string
	Link *model.PortalLink
}

// IssuePortalLink makes a signed link to the portal that opens once, until its ttl ends: the one
// way the API and the operator's CLI make one.
func (s *Service) IssuePortalLink(ctx context.Context, r PortalLinkRequest) (*PortalLink, error) {
	if err := s.PortalOn(); err != nil {
		return nil, err
	}
	if !r.Variant.Valid() {
		return nil, &VariantError{Variant: r.Variant}
	}
	ttl := DefaultPortalLinkTTL
	if r.TTL != nil {
		ttl = *r.TTL
	}
	if ttl <= 0 || ttl > MaxPortalLinkTTL {
		return nil, ErrPortalTTLOutOfRange
	}
	var token string
	var link *model.PortalLink
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		token, link, err = model.CreatePortalLink(ctx, tx, model.NewPortalLink{
			AccountID: r.AccountID, APIKeyID: r.APIKeyID, Variant: r.Variant, ReadOnly: r.ReadOnly, TTL: ttl,
		})
		if err != nil {
			return err
		}
		return audit.Record(ctx, tx, r.AccountID, r.Variant, audit.PortalLinkCreate, audit.TargetPortalLink, audit.ID(link.ID), audit.Changes{
			"readOnly": audit.Changed(nil, r.ReadOnly), "expiresAt": audit.Changed(nil, link.ExpiresAt)})
	})
	if err != nil {
		return nil, err
	}
	return &PortalLink{URL: model.PortalEnterURL(s.publicURL, token), Link: link}, nil
}

// RevokePortalAccess ends every live portal session of the account and revokes its unused links,
// so that nothing issued before opens the portal again. API keys are left alone.
// The audit log records it account-wide (portal_access.revoke, its target the account) with what
// it ended, when it ended anything.
func (s *Service) RevokePortalAccess(ctx context.Context, accountID int64) (model.PortalRevoked, error) {
	var n model.PortalRevoked
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if n, err = model.RevokePortalAccess(ctx, tx, accountID); err != nil || n == (model.PortalRevoked{}) {
			return err
		}
		return audit.Record(ctx, tx, accountID, model.AccountWide, audit.PortalAccessRevoke, audit.TargetAccount, audit.ID(accountID), audit.Changes{
			"sessionsEnded": audit.Changed(nil, n.Sessions), "linksRevoked": audit.Changed(nil, n.Links)})
	})
	if err != nil {
		return model.PortalRevoked{}, err
	}
	return n, nil
}

// EnterPortal exchanges a link's token for a session, once: it returns the session's plain id,
// shown once (the cookie's value), and the session. A forged, expired or revoked token is
// ErrLinkInvalid, a token opened before ErrLinkUsed.
func (s *Service) EnterPortal(ctx context.Context, token string) (string, *model.PortalSession, error) {
	return model.ExchangePortalToken(ctx, s.db, token)
}

// PortalSession returns the live session with that plain id (a request's cookie), or
// ErrSessionEnded.
func (s *Service) PortalSession(ctx context.Context, sessionID string) (*model.PortalSession, error) {
	return model.PortalSessionByID(ctx, s.db, sessionID)
}

// EndPortalSession ends the caller's session (its owner signed out): it opens nothing from then
// on. Ending an ended session is harmless.
func (s *Service) EndPortalSession(ctx context.Context, session *model.PortalSession) error {
	return model.EndPortalSession(ctx, s.db, session.ID)
}
