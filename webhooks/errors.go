package webhooks

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
)

// The refusals of the use cases. A surface maps each to its answer (the API's status and code, the
// portal's page or form error, the CLI's message); anything else is internal.
var (
	// ErrNotFound: no such webhook, delivery or event in the caller's scope (another account's is
	// not found too).
	ErrNotFound = model.ErrNotFound
	// ErrCanceled: the delivery was canceled with its webhook and cannot be sent again.
	ErrCanceled = dispatch.ErrCanceled
	// ErrUnavailable: Temporal could not be reached, or there is no dispatcher; nothing was queued.
	ErrUnavailable = errors.New("deliveries cannot be queued right now")
	// ErrIdempotencyConflict: an Idempotency-Key used before with another request.
	ErrIdempotencyConflict = model.ErrIdempotencyConflict
)

// InvalidError refuses a value of the caller's: Field names it as the API spells it (url,
// eventType, rateLimit, since, ...), and Format with Args says what is wrong in a sentence that
// names the field and never quotes a secret. A surface that bounds what it echoes clips the
// arguments (Args holds the caller's values as given).
type InvalidError struct {
	Field  string
	Format string
	Args   []any
	// Missing: the field was absent or empty. Malformed: the value is not of the field's syntax
	// (the API answers 400 rather than 422).
	Missing, Malformed bool
}

func (e *InvalidError) Error() string { return fmt.Sprintf(e.Format, e.Args...) }

// Detail is the message without the field's name that begins it ("must be before until"), for a
// surface that names the field its own way; a message that does not begin with it is whole.
func (e *InvalidError) Detail() string {
	msg := e.Error()
	if rest, ok := strings.CutPrefix(msg, e.Field+" "); ok {
		return rest
	}
	return msg
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Format: format, Args: args}
}

func missing(field string) *InvalidError {
	return &InvalidError{Field: field, Format: "%s is required", Args: []any{field}, Missing: true}
}

// LimitError refuses a webhook, or a notification endpoint (Channels), beyond the account's limit
// in its variant.
type LimitError struct {
	Max      int64
	Channels bool
}

func (e *LimitError) Error() string {
	if e.Channels {
		return fmt.Sprintf("this account already has %d notification endpoints; delete one first", e.Max)
	}
	return fmt.Sprintf("this account already has %d webhooks; delete one first", e.Max)
}

// ErrReplaysBusy refuses a replay while its account already runs MaxRunningReplays of them in the
// variant: one may start once one of those has ended or been canceled.
var ErrReplaysBusy = errors.New("webhooks: the account already runs its most replays")

// BusyError refuses bounded work of an account (a filter's trial, a replay's match) while it
// already runs Max of that Work at once; one may start after RetryAfter, by when a running one has
// ended (its time bound).
type BusyError struct {
	Work       string
	Max        int
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("this account already runs %d %s at once; try again when one has ended", e.Max, e.Work)
}

// RotationLimitError refuses a rotation while MaxPreviousSecrets earlier secrets still sign; a
// rotation succeeds again at RetryAt.
type RotationLimitError = model.RotationLimitError

// MaxPreviousSecrets is how many rotated-out secrets may sign beside the current one.
const MaxPreviousSecrets = model.MaxPreviousSecrets

// SecretOverlap is how long a rotated-out secret keeps signing beside the new one.
const SecretOverlap = model.SecretOverlap
