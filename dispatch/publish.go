package dispatch

import (
	"context"
	"log/slog"
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
	// FilterSkips counts the webhooks whose filters refused the events published (nil: none).
	FilterSkips *prometheus.CounterVec
}

// Change runs fn in one transaction, then starts the deliveries of every event it emitted.
func (p *Publisher) Change(ctx context.Context, fn func(ctx context.Context, cs *model.ChangeSet) error) error {
	cs, err := model.Change(ctx, p.DB, fn)
	if err != nil {
		return err
	}
	CountFilterSkips(p.FilterSkips, cs.Results)
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
