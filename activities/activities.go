// Package activities holds webhookd's Temporal activities: the HTTP delivery attempt, the status
// writes that follow it, and the owner's e-mail alert. Activities are methods on Activities, which
// carries their dependencies; each is idempotent because Temporal may run it more than once.
package activities

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// Error types of non-retryable application errors raised by activities.
const (
	ErrTypeBadInput = "BadInput"
	ErrTypeMail     = "MailRejected"
)

// Attempt error classes, recorded with every failed attempt and used as a metrics label.
const (
	ClassTimeout    = "timeout"
	ClassRefused    = "refused"
	ClassTLS        = "tls"
	ClassRedirect   = "redirect"
	ClassBlocked    = "blocked"
	ClassHTTPStatus = "http_status"
	ClassDNS        = "dns"
	ClassNetwork    = "network"
)

// Activities carries what the activities need. Build it once per worker process.
type Activities struct {
	DB      *bun.DB
	Secrets *model.SecretBox
	// HTTP is the one shared delivery client: keep-alive, no redirects, dial-time address checks.
	HTTP *http.Client
	// Timeout bounds one delivery attempt: connect, TLS, request and response.
	Timeout time.Duration
	Mailer  Mailer
	Links   Links
	// SiteBaseURL is where published websites live (WEBHOOKD_SITE_BASE_URL).
	SiteBaseURL string
	// Dispatch starts delivery workflows of events an activity emitted; nil leaves them to the
	// worker's sweeper. It is a function because activities cannot import the workflows package.
	Dispatch  func(ctx context.Context, refs []model.DeliveryRef) error
	Metrics   *Metrics
	UserAgent string
	// Now is the clock; nil means model.Now.
	Now func() time.Time
	Log *slog.Logger
}

// DeliverInput names one attempt of one delivery. Bodies are loaded from the database, never
// carried through workflow history.
type DeliverInput struct {
	DeliveryID int64
	EventID    int64
	WebhookID  int64
	// Attempt counts from 1 within the delivery, across manual retries.
	Attempt int
	// NextAttemptIn is the delay before the next scheduled attempt if this one fails; zero when this
	// is the last one. It is recorded so the REST API can show when the next try comes.
	NextAttemptIn time.Duration
}

// DeliverResult is the outcome of one attempt.
type DeliverResult struct {
	Delivered bool
	// WebhookGone is true when the webhook was deleted: the delivery ends without posting.
	WebhookGone bool
	StatusCode  int
	ErrorClass  string
	Error       string
	// AttemptedAt is when the attempt started; exhaustion compares it with the webhook's latest
	// status change.
	AttemptedAt time.Time
}

// ExhaustedInput reports a delivery whose schedule ran out (or whose test event failed).
type ExhaustedInput struct {
	DeliveryID    int64
	WebhookID     int64
	EventID       int64
	LastError     string
	LastAttemptAt time.Time
}

// ExhaustedResult says whether this exhaustion moved the webhook into failing, which is when the
// owner is alerted: once per move, not once per delivery.
type ExhaustedResult struct {
	Alert bool
}

// AlertInput names the delivery whose exhaustion the owner is told about.
type AlertInput struct {
	DeliveryID int64
	WebhookID  int64
	EventID    int64
	LastError  string
}
