// Package worker wires webhookd's Temporal worker: it registers the workflows and activities, runs
// the outbox sweeper that starts delivery workflows a crash left unstarted, and keeps the retention
// schedule in place.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/workflows"
)

// Config carries what the worker needs.
type Config struct {
	Client     client.Client
	TaskQueue  string
	DB         *bun.DB
	Activities *activities.Activities
	Dispatcher *dispatch.Dispatcher
	Logger     *slog.Logger
	// SweepInterval is how often the outbox is swept; deliveries younger than it are left to the
	// API, which starts them itself right after commit.
	SweepInterval time.Duration
	// MaxConcurrentDeliveries bounds the first attempts this process runs at once, and
	// MaxConcurrentRetries the later ones, on the retry task queue (zero: half as many).
	MaxConcurrentDeliveries int
	MaxConcurrentRetries    int
	// StopTimeout is how long a stopping worker lets attempts in flight finish (a deploy must not
	// cut a POST in half and send it again); zero cancels them at once.
	StopTimeout time.Duration
	// Retention is the purge of expired rows, which Run schedules (retention.go).
	Retention Retention
}

// Run runs the worker and the sweeper until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	// Temporal may still be starting (or briefly away): keep trying instead of taking the process,
	// and with it the API, down.
	var workers []sdkworker.Worker
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		var err error
		if workers, err = start(cfg); err == nil {
			break
		}
		cfg.Logger.Warn("temporal worker not started; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
	defer func() {
		// Both workers drain at once, so a stop takes StopTimeout at most, not twice that.
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(w.Stop)
		}
		wg.Wait()
	}()
	cfg.Logger.Info("temporal worker started", "task_queue", cfg.TaskQueue, "retry_task_queue", workflows.RetryTaskQueue(cfg.TaskQueue))
	// The retention schedule is set in the background (Temporal may refuse for a while); Run
	// waits for that to end before it returns.
	defer keepRetentionScheduled(ctx, cfg.Client, cfg.TaskQueue, cfg.Retention, cfg.Logger)()

	tick := time.NewTicker(cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if n, repaired, err := Sweep(ctx, cfg.DB, cfg.Dispatcher, cfg.SweepInterval, cfg.Activities.Notices); err != nil {
				cfg.Logger.Warn("outbox sweep", "err", err, "started", n, "repaired", repaired)
			} else if n > 0 || repaired > 0 {
				cfg.Logger.Info("outbox sweep started deliveries left behind", "started", n, "repaired", repaired)
			}
		}
	}
}

// MainWorkerOptions are the options of the worker that runs workflows and first attempts, with
// slots for that many attempts at once. cmd/loadtest's bare-Temporal tier runs with them too, so
// the tiers it compares differ only in what the workflow does.
func MainWorkerOptions(slots int) sdkworker.Options {
	return sdkworker.Options{
		MaxConcurrentActivityExecutionSize: slots,
		// A delivery's first attempt is a local activity (docs/operations.md): the
		// same bound applies to it.
		MaxConcurrentLocalActivityExecutionSize: slots,
		// Workflow task pollers scale with the server's feedback. Fixed ones (4 did) all
		// waited on the sticky queue while its last answer's backlog hint was stale, for the
		// server's long poll, a minute, while the normal queue filled (docs/operations.md).
		// More than the default two keep tasks flowing when many short deliveries finish at once.
		WorkflowTaskPollerBehavior:       sdkworker.NewPollerBehaviorAutoscaling(sdkworker.PollerBehaviorAutoscalingOptions{InitialNumberOfPollers: 4, MinimumNumberOfPollers: 2, MaximumNumberOfPollers: 8}),
		MaxConcurrentActivityTaskPollers: 8,
	}
}

// start starts the two workers of a process: one for workflows and first attempts, and one with
// its own activity slots for retried attempts, so that however many retries are due, a fresh
// event's first attempt finds a free slot.
func start(cfg Config) ([]sdkworker.Worker, error) {
	opts := MainWorkerOptions(cfg.MaxConcurrentDeliveries)
	opts.WorkerStopTimeout = cfg.StopTimeout
	main := sdkworker.New(cfg.Client, cfg.TaskQueue, opts)
	main.RegisterWorkflow(workflows.DeliveryWorkflow)
	main.RegisterWorkflow(workflows.WebsitePublishWorkflow)
	main.RegisterWorkflow(workflows.Retention)
	main.RegisterWorkflow(workflows.FanOutWorkflow)
	main.RegisterWorkflow(workflows.RecoverWorkflow)
	main.RegisterWorkflow(workflows.RetryWebhookWorkflow)
	main.RegisterWorkflow(workflows.ReplayWorkflow)
	main.RegisterActivity(cfg.Activities)
	main.RegisterActivity(&dispatch.Activities{DB: cfg.DB, Dispatcher: cfg.Dispatcher})
	if err := main.Start(); err != nil {
		return nil, err
	}
	slots := cfg.MaxConcurrentRetries
	if slots <= 0 {
		slots = max(1, cfg.MaxConcurrentDeliveries/2)
	}
	retries := sdkworker.New(cfg.Client, workflows.RetryTaskQueue(cfg.TaskQueue), sdkworker.Options{
		MaxConcurrentActivityExecutionSize: slots,
		MaxConcurrentActivityTaskPollers:   4,
		DisableWorkflowWorker:              true,
		WorkerStopTimeout:                  cfg.StopTimeout,
	})
	retries.RegisterActivity(cfg.Activities)
	if err := retries.Start(); err != nil {
		main.Stop()
		return nil, err
	}
	return []sdkworker.Worker{main, retries}, nil
}

// claimGraceSweeps is how many sweep intervals a manual retry's claim on a delivery may stand
// before the sweeper takes it for one whose process died (model.ClaimDelivery). A live claim lasts
// one database write and one Temporal call, a few milliseconds, and at most the Temporal client's
// RPC timeout (10 s); at the default interval (5 s) the grace is 30 s. A shorter grace would only
// cost extra signals, each at worst one more POST with the same webhook-id.
const claimGraceSweeps = 6

// laneGraceSweeps is how many sweep intervals an ordered lane with work left may go without moving
// before the sweeper starts its head: 5 minutes at the default interval.
const laneGraceSweeps = 60

// Sweep starts the workflows of deliveries older than minAge that were never started, then hands
// to their workflows the deliveries that a manual retry claimed more than claimGraceSweeps sweep
// intervals (minAge) ago and never handed over. It returns how many it started and how many it
// handed over. Last, it ends the storm rule's quiet periods that are over
// (model.EndQuietPeriods), then the account rule's (model.EndAccountQuietPeriods), and starts the
// notices and summaries that makes.
func Sweep(ctx context.Context, db *bun.DB, s *dispatch.Dispatcher, minAge time.Duration, rules notices.Rules) (started, repaired int, err error) {
	// One replica sweeps at a time; the others skip this round.
	unlock, ok, err := model.LockSweep(ctx, db)
	if err != nil || !ok {
		return 0, 0, err
	}
	defer unlock()
	for {
		refs, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(-minAge), 200)
		if err != nil {
			return started, 0, err
		}
		if len(refs) == 0 {
			break
		}
		if err := s.Start(ctx, db, refs, dispatch.StartedBySweeper); err != nil {
			return started, 0, err
		}
		started += len(refs)
	}
	repaired, err = s.RepairClaims(ctx, db, model.Now().Add(-claimGraceSweeps*minAge))
	if err != nil {
		return started, repaired, err
	}
	// The heads of the ordered lanes with work left that have not moved for a while: started, in
	// case their start was lost or their run failed and was not retried (docs/ordering.md). A head
	// that runs (blocked, or slow) costs one refused start per period.
	now := model.Now()
	heads, err := model.StaleLanes(ctx, db, now.Add(-laneGraceSweeps*minAge), now, 200)
	if err == nil {
		err = s.Start(ctx, db, heads, dispatch.StartedBySweeper)
	}
	if err != nil {
		return started, repaired, err
	}
	// The storm rule's quiet periods that are over: a webhook that failed meanwhile is told now.
	// Then the account rule's: the notices held from the e-mail and chats are summarised.
	for _, end := range []func(context.Context, bun.IDB, model.NoticePolicy, int64) ([]*model.PublishResult, error){
		model.EndQuietPeriods, model.EndAccountQuietPeriods,
	} {
		told, err := end(ctx, db, rules, 200)
		for _, n := range told {
			if err := s.Start(ctx, db, n.Refs(), dispatch.StartedBySweeper); err != nil {
				return started, repaired, err
			}
			started += len(n.Deliveries)
		}
		if err != nil {
			return started, repaired, err
		}
	}
	return started, repaired, nil
}
