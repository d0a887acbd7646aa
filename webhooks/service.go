// Package webhooks holds the use cases of an account's webhooks and of the deliveries made to them:
// register, change, delete, reveal and rotate the secret, send a test, disable and enable, resend,
// retry and recover, read a webhook's health, manage the notification endpoints (channels) that
// receive an account's notices and list those notices, accept an event another system hands in
// (the intake's rules), and publish what a change emits. The REST API, the portal and the operator's
// CLI bind their input, call a Service method, and present or render its answer: each rule is
// written here once, and errors.go is the one vocabulary of refusals that every surface words in
// its own way.
package webhooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/secretbox"
)

// Config carries the use cases' dependencies and limits. Its values come from cmd/webhookd's
// Config, the only place that holds their defaults.
type Config struct {
	DB *model.DB
	// Dispatcher starts, signals and cancels delivery workflows. Nil leaves every start to the
	// worker's sweeper, and the use cases that need Temporal (resend, retry, recover) answer
	// ErrUnavailable.
	Dispatcher *dispatch.Dispatcher
	// Secrets seals and opens signing secrets. Nil for a caller that neither registers webhooks
	// nor shows or rotates a secret (the operator's retry and recover): those use cases then fail.
	Secrets *secretbox.Box
	// Policy judges a receiver's URL at registration, resolving its host with Resolver (nil:
	// net.DefaultResolver), as the delivery client judges it at dial time.
	Policy   egress.AddressPolicy
	Resolver *net.Resolver
	Logger   *slog.Logger
	// MaxWebhooks bounds an account's live webhooks in each variant (WEBHOOKD_MAX_WEBHOOKS).
	MaxWebhooks int64
	// FilterSkips counts the webhooks whose payload filters refused an accepted event
	// (dispatch.NewFilterSkipsMetric); nil counts nothing.
	FilterSkips *prometheus.CounterVec
	// FilterOverruns counts the webhooks an accepted event reached unjudged because their payload
	// filter ran out of its budget (dispatch.NewFilterOverrunsMetric); nil counts nothing.
	FilterOverruns *prometheus.CounterVec
	// RequestTimeout bounds how long a request waits on Temporal after its commit (a start, a
	// resend, a recovery): what is not started within it the worker's sweeper starts
	// (WEBHOOKD_TEMPORAL_REQUEST_TIMEOUT).
	RequestTimeout time.Duration
	// TrialTime bounds the work of one filter trial; zero is MaxTrialTime. A test that judges the
	// trial's byte bound lengthens it, so that a loaded machine cannot end the trial by time first.
	TrialTime time.Duration
	// Notices are the rules of the notices a use case records (a person's disable or enable),
	// the worker's own (docs/notifications.md); Health reads their auto-disable rule to tell an
	// owner when it would disable a failing webhook.
	Notices notices.Rules
	// Clock is the time the use cases stamp and judge by (nil: model.Now). Only tests set it; a
	// path not yet given it reads model.Now (docs/architecture.md, "The clock").
	Clock model.Clock
	// Versions is the table of the versions of event types' data (sources.Versions; docs/events.md,
	// "Versions"): the version a new webhook and a published event get, the versions a webhook may
	// pin, and the conversions of an event's data for a webhook pinned to an older one (its filter,
	// its body in the delivery log and the portal). Nil: every type has one version, and nothing is
	// converted.
	Versions model.EventVersions
}

// Service runs the use cases. Its methods take the caller's scope (an account and a variant) and
// never reach outside it.
type Service struct {
	db          *model.DB
	dispatcher  *dispatch.Dispatcher
	publisher   *dispatch.Publisher
	secrets     *secretbox.Box
	policy      egress.AddressPolicy
	resolver    *net.Resolver
	log         *slog.Logger
	maxWebhooks int64
	timeout     time.Duration
	notices     notices.Rules
	versions    model.EventVersions
	// trials admits an account's filter trials; trialTime bounds each one's work (MaxTrialTime;
	// tests shorten it). replayMatches, replayMatchTime and replayMatchBytes do the same for
	// replays' matches (MaxReplayMatchTime, MaxReplayMatchBytes).
	trials           accountGate
	trialTime        time.Duration
	replayMatches    accountGate
	replayMatchTime  time.Duration
	replayMatchBytes int
	clock            model.Clock
}

// New checks cfg and builds the Service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("webhooks: DB is required")
	case cfg.MaxWebhooks <= 0:
		// A zero would refuse every webhook.
		return nil, fmt.Errorf("webhooks: MaxWebhooks %d: must be positive", cfg.MaxWebhooks)
	case cfg.RequestTimeout <= 0:
		return nil, fmt.Errorf("webhooks: RequestTimeout %v: must be positive", cfg.RequestTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{
		db: cfg.DB, dispatcher: cfg.Dispatcher, secrets: cfg.Secrets, policy: cfg.Policy, resolver: cfg.Resolver,
		log: cfg.Logger, maxWebhooks: cfg.MaxWebhooks, timeout: cfg.RequestTimeout, notices: cfg.Notices, versions: cfg.Versions,
		trialTime: cmp.Or(cfg.TrialTime, MaxTrialTime), replayMatchTime: MaxReplayMatchTime, replayMatchBytes: MaxReplayMatchBytes, clock: cfg.Clock,
		publisher: &dispatch.Publisher{DB: cfg.DB, Dispatcher: cfg.Dispatcher, Timeout: cfg.RequestTimeout, Log: cfg.Logger,
			FilterSkips: cfg.FilterSkips, FilterOverruns: cfg.FilterOverruns, Versions: cfg.Versions, Clock: cfg.Clock},
	}, nil
}

// Change commits a domain change with the events it emits (model.Change), then starts their
// deliveries within the request timeout: the one way a surface publishes.
func (s *Service) Change(ctx context.Context, fn func(ctx context.Context, cs *model.ChangeSet) error) error {
	return s.publisher.Change(ctx, fn)
}

// Publish stores one event on its own (the intake, a test event, a notice) and starts its
// deliveries. Its subscribers' payload filters are judged first, before its transaction begins
// (model.JudgeFilters), so that no database lock is held while they run: on SQLite, while a
// publish's filters run, every other account's publish may take the write lock.
func (s *Service) Publish(ctx context.Context, ne model.NewEvent) (*model.PublishResult, error) {
	if err := model.JudgeFilters(ctx, s.db, s.versions, &ne); err != nil {
		return nil, err
	}
	return s.publisher.Publish(ctx, ne)
}

// DataFor is ev's data as webhook w receives it, in w's version of ev's type (model.Event.DataFor):
// what the delivery log and the portal show of the body w gets.
func (s *Service) DataFor(ev *model.Event, w *model.Webhook) (json.RawMessage, error) {
	return ev.DataFor(s.versions, w)
}

// errNoSecrets: a use case that seals or opens a secret, in a Service built without Secrets.
var errNoSecrets = errors.New("webhooks: this Service has no secret box (Config.Secrets)")

// box is the secret box, or errNoSecrets.
func (s *Service) box() (*secretbox.Box, error) {
	if s.secrets == nil {
		return nil, errNoSecrets
	}
	return s.secrets, nil
}

// temporal runs call on the dispatcher within the request timeout. Without a dispatcher, or when
// Temporal cannot be reached, the answer is ErrUnavailable (the cause logged here, once).
func (s *Service) temporal(ctx context.Context, what string, call func(ctx context.Context, d *dispatch.Dispatcher) error) error {
	if s.dispatcher == nil {
		return ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := call(ctx, s.dispatcher)
	if errors.Is(err, dispatch.ErrTemporal) {
		s.log.Warn("temporal unavailable", "action", what, "err", err)
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// RequestTimeout bounds how long a request waits on Temporal.
func (s *Service) RequestTimeout() time.Duration { return s.timeout }
