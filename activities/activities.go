// Package activities holds webhookd's Temporal activities: the HTTP delivery attempt, the status
// writes that follow it, and the owner's e-mail alert. Activities are methods on Activities, which
// carries their dependencies; each is idempotent because Temporal may run it more than once.
package activities

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/secretbox"
)

// Error types of application errors raised by activities. Both are non-retryable.
const (
	ErrTypeBadInput = "BadInput"
	ErrTypeMail     = "MailRejected"
)

// Attempt error classes, recorded with every failed attempt and used as a metrics label. Failures
// of the exchange itself are named by egress; the receiver's answers are judged here.
const (
	ClassTimeout          = egress.ClassTimeout
	ClassRefused          = egress.ClassRefused
	ClassTLS              = egress.ClassTLS
	ClassBlocked          = egress.ClassBlocked
	ClassDNS              = egress.ClassDNS
	ClassNetwork          = egress.ClassNetwork
	ClassCircuitOpen      = egress.ClassCircuitOpen
	ClassResponseTooLarge = egress.ClassResponseTooLarge
	ClassProxy            = egress.ClassProxy
	ClassProxyUpstream    = egress.ClassProxyUpstream
	ClassRedirect         = "redirect"
	ClassHTTPStatus       = "http_status"
)

// Activities carries what the activities need. Build it once per worker process.
type Activities struct {
	DB      *model.DB
	Secrets *secretbox.Box
	// Egress is the one shared delivery client: keep-alive, no redirects, dial-time address
	// checks, bounded replies and per-host limits. Its timeout bounds one delivery attempt.
	Egress *egress.Client
	// Tokens caches the OAuth2 tokens of webhooks' receiver authentication (auth.go); nil fails
	// every attempt of an oauth2 webhook with ClassAuthFailed.
	Tokens *Tokens
	// Brokers keeps the connections of webhooks whose destination is a broker
	// (receiver_broker.go); nil fails every attempt of such a webhook.
	Brokers *broker.Pool
	Mailer  Mailer
	Links   Links
	// SiteBaseURL is where published websites live (WEBHOOKD_SITE_BASE_URL).
	SiteBaseURL string
	Metrics     *Metrics
	// FilterSkips counts the webhooks whose payload filters refused a scheduled publication's
	// event (dispatch.NewFilterSkipsMetric, shared with the API's publishes); nil counts nothing.
	FilterSkips *prometheus.CounterVec
	// FilterOverruns counts the webhooks a scheduled publication's event reached unjudged, their
	// payload filter out of its budget (dispatch.NewFilterOverrunsMetric); nil counts nothing.
	FilterOverruns *prometheus.CounterVec
	UserAgent      string
	// Notices say when exhausted deliveries disable their webhook (WEBHOOKD_DISABLE_AFTER,
	// WEBHOOKD_DISABLE_MIN_EXHAUSTED; the zero rule never does), when the owner is warned of it,
	// the storm rule and the portal's address for links (docs/notifications.md).
	Notices notices.Rules
	// Versions is the table of the versions of event types' data (sources.Versions; docs/events.md,
	// "Versions"): a webhook pinned to an older version than its event's gets the data converted
	// down, and a scheduled publication's event is written in the newest. Nil: every type has one
	// version, and nothing is converted.
	Versions model.EventVersions
	// Tracer, when set, makes a client span of every POST to a receiver and sends its traceparent
	// (tracing.go); nil (tracing off) makes no span and sends no traceparent.
	Tracer trace.Tracer
	// Now is the clock; nil means model.Now.
	Now func() time.Time
	Log *slog.Logger
	// LocalWaits bounds how many first attempts (local activities) may ask for their turn at once
	// with leave to wait for one due soon (within localTurnWait), instead of handing the attempt
	// back to run as a regular activity; one asking past it is handed back when its turn is not
	// free. Zero: none waits. LocalWaitsFor gives webhookd's.
	LocalWaits int

	localWaiting atomic.Int64
}

// LocalWaitsFor is the LocalWaits of a worker with slots for that many first attempts at once: an
// eighth of them may wait briefly for a quick receiver's turn.
func LocalWaitsFor(slots int) int { return max(1, slots/8) }

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
	// MaxRetryDelay bounds how long a receiver's Retry-After may push the next attempt: the
	// schedule's longest delay.
	MaxRetryDelay time.Duration
	// AttemptTimeout bounds the HTTP exchange: the workflow input's value, from which the
	// activity's StartToClose is derived too, so the exchange always ends first. DeliveryWorkflow
	// always sets it (it refuses an input without one); zero, in a direct call, leaves the egress
	// client's own timeout.
	AttemptTimeout time.Duration
	// Resend says that the delivery was delivered before: an ordered webhook's receiver is told
	// (wire.HeaderResend).
	Resend bool
}

// DeliverResult is the outcome of one attempt.
type DeliverResult struct {
	Delivered bool
	// WebhookGone is true when the webhook was deleted: the delivery ends without posting.
	WebhookGone bool
	// WebhookDisabled is true when the webhook is disabled: nothing was posted and the delivery
	// was recorded as exhausted, for a manual retry to pick up once the webhook is enabled.
	WebhookDisabled bool
	// HostBusy is true when the attempt was held back (HeldBy says by what: the host's cap, the
	// endpoint's cap or rate limit, a breaker's probe): nothing was posted or recorded. The
	// workflow makes a held local attempt again at once as a regular activity, which may wait its
	// turn in the worker; a held regular attempt comes back in RetryIn, when the turn the worker
	// booked for it comes.
	HostBusy bool
	HeldBy   string
	RetryIn  time.Duration
	// NextAttemptIn is the wait before the next attempt after a failure: the scheduled delay, or
	// longer when a 429 or 503 answer asked for it with Retry-After (up to MaxRetryDelay).
	NextAttemptIn time.Duration
	StatusCode    int
	ErrorClass    string
	Error         string
	// AttemptedAt is when the attempt started; exhaustion compares it with the webhook's latest
	// status change.
	AttemptedAt time.Time
	// Notices are the events (notices, docs/notifications.md) the attempt recorded: the
	// webhook.recovered of a success that ended a failure. The workflow starts their deliveries.
	Notices []int64
	// Recorded is true when the attempt had already delivered, and its outcome was recorded, when it
	// ran again (model.DeliveryTarget.AlreadyDelivered): nothing was sent again.
	Recorded bool
}

// outcomePhrases say what an attempt that got no HTTP answer ran into, in a few words.
var outcomePhrases = map[string]string{
	ClassTimeout:          "no answer in time",
	ClassRefused:          "connection refused",
	ClassTLS:              "TLS handshake failed",
	ClassBlocked:          "address not public, not contacted",
	ClassDNS:              "host name does not resolve",
	ClassNetwork:          "network error",
	ClassCircuitOpen:      "paused after repeated failures",
	ClassResponseTooLarge: "response too large",
	ClassAuthFailed:       "token endpoint failed, not sent",
	ClassProxy:            "egress proxy failed",
	ClassProxyUpstream:    "egress proxy could not reach the receiver",
}

// Outcome says in a few words what the attempt got, for the Web UI's summaries: "500 from
// receiver", "no answer in time". It names neither the URL nor anything secret.
func (r DeliverResult) Outcome() string {
	switch {
	case r.WebhookGone:
		return "webhook deleted"
	case r.WebhookDisabled:
		return "held: webhook disabled"
	case r.HostBusy:
		if r.HeldBy != "" {
			return "held: " + egress.HoldReason(r.HeldBy).Phrase()
		}
		return "receiver host busy"
	case r.StatusCode != 0:
		return fmt.Sprintf("%d from receiver", r.StatusCode)
	case r.Recorded:
		return "delivered, as recorded before"
	}
	if p, ok := outcomePhrases[r.ErrorClass]; ok {
		return p
	}
	return r.ErrorClass
}

// ExhaustedInput reports a delivery whose schedule ran out (or whose test event failed).
type ExhaustedInput struct {
	DeliveryID    int64
	WebhookID     int64
	EventID       int64
	LastError     string
	LastAttemptAt time.Time
	// LastErrorClass and LastStatusCode are the last attempt's, and EventType the delivery's
	// event type, for the notices.
	LastErrorClass string
	LastStatusCode int
	EventType      string
}

// ExhaustedResult says whether this exhaustion moved the webhook into failing or disabled it,
// which is when the owner is told: once per move, not once per delivery. At most one is true.
type ExhaustedResult struct {
	Alert bool
	// Disabled: this exhaustion disabled the webhook (Activities.Notices.Disable).
	Disabled bool
	// Notices are the events (notices) the exhaustion recorded; the workflow starts their deliveries.
	Notices []int64
}
