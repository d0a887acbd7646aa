package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// Publisher is the one way the API and the portal publish: a domain change and the events it
// emits commit together (model.Change), then the events' deliveries start, within Timeout. A start
// that fails is not the caller's problem: the deliveries are stored, and the worker's sweeper
// starts them (Dispatcher nil: it always does).
type Publisher struct {
	DB         bun.IDB
	Dispatcher *Dispatcher
	Timeout    time.Duration
	Log        *slog.Logger
	// Versions is the table of event versions the events are published with (model.Change); nil:
	// every type has one version.
	Versions model.EventVersions
	// FilterSkips counts the webhooks whose filters refused the events published (nil: none).
	FilterSkips *prometheus.CounterVec
	// FilterOverruns counts the webhooks that events published reached unjudged, their filter out
	// of its budget (nil: none); each such webhook is also logged, once (overrunLog).
	FilterOverruns *prometheus.CounterVec
	// Clock stamps the events published (nil: model.Now).
	Clock model.Clock

	overruns overrunLog
}

// Change runs fn in one transaction, then starts the deliveries of every event it emitted.
func (p *Publisher) Change(ctx context.Context, fn func(ctx context.Context, cs *model.ChangeSet) error) error {
	cs, err := model.Change(ctx, p.DB, p.Versions, func(ctx context.Context, cs *model.ChangeSet) error {
		cs.Clock = p.Clock
		return fn(ctx, cs)
	})
	if err != nil {
		return err
	}
	CountFilterSkips(p.FilterSkips, cs.Results)
	p.countOverruns(cs.Results)
	for _, res := range cs.Results {
		p.Start(ctx, res)
	}
	return nil
}

// Publish stores one event on its own (the intake, a test event) and starts its deliveries.
func (p *Publisher) Publish(ctx context.Context, ne model.NewEvent) (*model.PublishResult, error) {
	var res *model.PublishResult
	err := p.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		res, err = cs.Emit(ctx, ne)
		return err
	})
	return res, err
}

// Start starts the deliveries of a committed publish, bounded by Timeout: with Temporal away the
// client is answered anyway (the event is stored) and the sweeper starts the workflows once
// Temporal is back.
func (p *Publisher) Start(ctx context.Context, res *model.PublishResult) {
	if p.Dispatcher == nil || res.Replayed || len(res.Deliveries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if err := p.Dispatcher.StartEvent(ctx, p.DB, res.Refs()); err != nil {
		p.Log.Warn("start deliveries; the sweeper will retry", "event", res.Event.ID, "err", err)
	}
}

// countOverruns counts the webhooks that the newly accepted events among results reached unjudged,
// their payload filter out of its budget, and logs each webhook the first time: its filter is its
// owner's to fix (docs/filters.md, "What a filter may cost"), and one line per publish would let
// one account fill the log. The line names the webhook and the event, never the event's data.
func (p *Publisher) countOverruns(results []*model.PublishResult) {
	for _, res := range results {
		if res.Replayed || len(res.Overran) == 0 {
			continue
		}
		if p.FilterOverruns != nil {
			p.FilterOverruns.WithLabelValues(string(res.Event.Variant)).Add(float64(len(res.Overran)))
		}
		for _, id := range p.overruns.first(res.Overran) {
			p.Log.Warn("payload filter ran out of its budget; the event reached the webhook unjudged",
				"webhook", id, "account", res.Event.AccountID, "variant", res.Event.Variant, "eventType", res.Event.EventType, "event", res.Event.ID)
		}
	}
}

// overrunLogSize bounds overrunLog: when full it forgets every webhook, which then logs once more.
const overrunLogSize = 10_000

// overrunLog remembers the webhooks whose filter overran, so that each is logged once. Its zero
// value is ready.
type overrunLog struct {
	mu   sync.Mutex
	seen map[int64]bool
}

// first returns the webhooks among ids that it has not seen before, and remembers them.
func (l *overrunLog) first(ids []int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fresh []int64
	for _, id := range ids {
		if l.seen[id] {
			continue
		}
		if l.seen == nil || len(l.seen) >= overrunLogSize {
			l.seen = make(map[int64]bool)
		}
		l.seen[id] = true
		fresh = append(fresh, id)
	}
	return fresh
}
