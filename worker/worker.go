// Package worker wires webhookd's Temporal worker: it registers the workflows and activities and
// runs the outbox sweeper that starts delivery workflows a crash left unstarted.
package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Config carries what the worker needs.
type Config struct {
	Client     client.Client
	TaskQueue  string
	DB         *bun.DB
	Activities *activities.Activities
	Starter    *workflows.Starter
	Logger     *slog.Logger
	// SweepInterval is how often the outbox is swept; deliveries younger than it are left to the
	// API, which starts them itself right after commit.
	SweepInterval time.Duration
	// MaxConcurrentDeliveries bounds the delivery attempts this process runs at once.
	MaxConcurrentDeliveries int
}

// Run runs the worker and the sweeper until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	// Temporal may still be starting (or briefly away): keep trying instead of taking the process,
	// and with it the API, down.
	var w sdkworker.Worker
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		w = sdkworker.New(cfg.Client, cfg.TaskQueue, sdkworker.Options{
			MaxConcurrentActivityExecutionSize: cfg.MaxConcurrentDeliveries,
			// More pollers than the default two keep tasks flowing when many short deliveries
			// finish at once (measured with cmd/loadtest).
			MaxConcurrentWorkflowTaskPollers: 4,
			MaxConcurrentActivityTaskPollers: 8,
		})
		w.RegisterWorkflow(workflows.DeliveryWorkflow)
		w.RegisterWorkflow(workflows.WebsitePublishWorkflow)
		w.RegisterActivity(cfg.Activities)
		err := w.Start()
		if err == nil {
			break
		}
		cfg.Logger.Warn("temporal worker not started; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
	defer w.Stop()
	cfg.Logger.Info("temporal worker started", "task_queue", cfg.TaskQueue)

	tick := time.NewTicker(cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if n, err := Sweep(ctx, cfg.DB, cfg.Starter, cfg.SweepInterval); err != nil {
				cfg.Logger.Warn("outbox sweep", "err", err, "started", n)
			} else if n > 0 {
				cfg.Logger.Info("outbox sweep started deliveries left behind", "started", n)
			}
		}
	}
}

// Sweep starts the workflows of deliveries older than minAge that were never started, and returns
// how many it started.
func Sweep(ctx context.Context, db *bun.DB, s *workflows.Starter, minAge time.Duration) (int, error) {
	total := 0
	for {
		refs, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(-minAge), 200)
		if err != nil || len(refs) == 0 {
			return total, err
		}
		if err := s.Dispatch(ctx, db, refs); err != nil {
			return total, err
		}
		total += len(refs)
	}
}
