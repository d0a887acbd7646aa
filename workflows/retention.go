package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
)

// RetentionScheduleID is the one Temporal Schedule of the retention purge of the deployment whose
// task queue is queue: webhookd-retention by default. Every worker replica creates or updates it at
// start; two deployments sharing a namespace (each with its own queue) each get their own. The
// workflows it starts are named after it, with the scheduled time appended by Temporal.
func RetentionScheduleID(queue string) string { return queue + "-retention" }

// DefaultRetentionBatches bounds the batches of one Retention run.
const DefaultRetentionBatches = 100

// RetentionInput starts a Retention run. The schedule's action carries it, so the worker's
// configuration reaches the next run when a worker updates the schedule at start.
type RetentionInput struct {
	// Retention is WEBHOOKD_RETENTION: what expired longer ago than this goes.
	Retention time.Duration
	// BatchSize bounds the deliveries (with their attempts) and the events each PurgeExpired call
	// examines.
	BatchSize int
	// MaxBatches bounds the batches of one run; a run that reaches it with more to do continues as
	// new, so the history stays small however large the backlog.
	MaxBatches int
	// Before and After carry a pass on across continue-as-new: its cutoff and where it got to.
	// A scheduled run leaves them zero and starts a pass of its own.
	Before time.Time
	After  model.PurgeCursor
}

// RetentionResult is what a Retention run deleted.
type RetentionResult struct {
	Before  time.Time
	Batches int
	model.Purged
}

// Retention deletes the attempts, deliveries and events that expired more than in.Retention ago, a
// batch at a time, until the pass reaches the cutoff (or, after MaxBatches batches, it continues as
// new with a fresh history and the pass's cutoff and cursor). The schedule RetentionScheduleID
// starts it every hour; a run (or chain of runs) still going when the next is due makes the
// schedule skip that one.
func Retention(ctx workflow.Context, in RetentionInput) (RetentionResult, error) {
	if in.Retention <= 0 || in.BatchSize <= 0 || in.MaxBatches <= 0 {
		return RetentionResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("retention input %+v: retention, batch size and batches must be positive", in),
			activities.ErrTypeBadInput, nil)
	}
	if in.Before.IsZero() {
		in.Before = workflow.Now(ctx).Add(-in.Retention)
	}
	res := RetentionResult{Before: in.Before}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		// One batch is a few short statements.
		StartToCloseTimeout: time.Minute,
		// A database outage fails the run after a few minutes: it then shows as Failed in the Web
		// UI, and the next scheduled run starts over.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 8, NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}},
	})
	var a *activities.Activities
	for res.Batches < in.MaxBatches {
		var b model.PurgeBatch
		if err := workflow.ExecuteActivity(ctx, a.PurgeExpired, activities.PurgeInput{Before: in.Before, After: in.After, Limit: in.BatchSize}).
			Get(ctx, &b); err != nil {
			return res, err
		}
		res.Batches++
		res.Attempts, res.Deliveries, res.Events = res.Attempts+b.Attempts, res.Deliveries+b.Deliveries, res.Events+b.Events
		in.After = b.Next
		if b.Done {
			workflow.GetLogger(ctx).Info("retention pass done", "before", res.Before, "batches", res.Batches,
				"attempts", res.Attempts, "deliveries", res.Deliveries, "events", res.Events)
			return res, nil
		}
	}
	workflow.GetLogger(ctx).Info("retention pass continues as new", "before", res.Before, "batches", res.Batches,
		"attempts", res.Attempts, "deliveries", res.Deliveries, "events", res.Events)
	return res, workflow.NewContinueAsNewError(ctx, Retention, in)
}
