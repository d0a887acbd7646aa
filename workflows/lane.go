package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/model"
)

// The activities of package dispatch that a LaneWorkflow runs, by registered name (see
// ActivityStartDeliveries).
const (
	// ActivityNextInLane records how far a lane got and reads its next deliveries (NextInLaneInput;
	// it returns a LaneBatch).
	ActivityNextInLane = "NextInLane"
	// ActivityAwaitDone returns once a delivery is done as its lane counts it (delivered, or
	// canceled), failing, and so retried, until then (its id).
	ActivityAwaitDone = "AwaitDone"
)

// SignalWake tells a LaneWorkflow that its lane has a new delivery. It carries nothing: the lane
// reads what is new from the database.
const SignalWake = "wake"

// LaneRetryWindow is how long the delivery at a lane's head waits, exhausted, for its owner to
// retry or skip it: as long as it takes, since the lane behind it waits too (docs/ordering.md).
const LaneRetryWindow = 10 * 365 * 24 * time.Hour

// laneRunLength is how many deliveries one run of a LaneWorkflow makes before it continues as new,
// which keeps its history short however long the lane lives.
const laneRunLength = 200

// LaneBatchSize is how many deliveries a lane reads at a time.
const LaneBatchSize = 100

// LaneWorkflowID names the one workflow of a lane of a webhook: "lane:<webhook>:<lane>".
func LaneWorkflowID(webhookID, laneID int64) string {
	return fmt.Sprintf("lane:%d:%d", webhookID, laneID)
}

// LaneInput starts a LaneWorkflow.
type LaneInput struct {
	LaneID    int64
	WebhookID int64
	// Done is the number of the last delivery an earlier run of the lane finished (it continued as
	// new); 0 reads it from the lane's row.
	Done int64
	// Delivery is what every delivery of the lane is started with but its ids: the schedule, the
	// retry window (LaneRetryWindow), the timeouts and the retry task queue.
	Delivery DeliveryInput
	// FairnessKey is the account's (dispatch.FairnessKey): the lane's deliveries share their
	// account's turns as any other.
	FairnessKey string
}

// NextInLaneInput asks for a lane's deliveries after Done, recording that it got there.
type NextInLaneInput struct {
	LaneID int64
	Done   int64
}

// LaneBatch is a lane's next deliveries, in order, and how far the lane had got (its row's
// done_seq, which may be ahead of what the run asked with: a run started anew).
type LaneBatch struct {
	Work []model.LaneWork
	Done int64
}

// LaneWorkflow makes the deliveries of one lane (an ordered webhook's events that share a key,
// docs/ordering.md) one at a time, in their order: each is its own DeliveryWorkflow, started as a
// child under the pair's usual id, and the next starts only once it ended delivered, or was
// skipped (canceled) by its owner. A head that runs out of its schedule waits, exhausted, for a
// retry or a skip as long as it takes, and so does the lane behind it; other lanes go on.
//
// The lane reads its deliveries from the database (ActivityNextInLane), never from its signals,
// so a wake lost or late loses nothing: intake's commit order is the order. With nothing left to
// make, the workflow ends; the next delivery's wake (SignalWithStart) starts it again.
func LaneWorkflow(ctx workflow.Context, in LaneInput) error {
	wake := workflow.GetSignalChannel(ctx, SignalWake)
	// The read is a local activity: one marker in the lane's history, and no activity task for
	// the server to match, for each batch. Its retries go on while the database is away.
	opts := dbOptions()
	db := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout,
		ScheduleToCloseTimeout: localRetryHorizon, RetryPolicy: opts.RetryPolicy})
	done, ran := in.Done, 0
	for {
		drain(wake) // what they announce, the read below finds
		var next LaneBatch
		if err := workflow.ExecuteLocalActivity(db, ActivityNextInLane, NextInLaneInput{LaneID: in.LaneID, Done: done}).Get(ctx, &next); err != nil {
			return err
		}
		done = max(done, next.Done)
		if len(next.Work) == 0 {
			if wake.Len() > 0 {
				continue // a delivery committed after the read
			}
			return nil
		}
		for _, w := range next.Work {
			if err := runInLane(ctx, in, w); err != nil {
				return err
			}
			done = w.Seq
			ran++
		}
		if ran >= laneRunLength || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			in.Done = done
			return workflow.NewContinueAsNewError(ctx, LaneWorkflow, in)
		}
	}
}

// runInLane makes one delivery of a lane and returns once it is done: its DeliveryWorkflow, run as
// a child, ended delivered, canceled (skipped by its owner, or its webhook deleted), or, when that
// run could not end it so (it failed, or one started outside the lane runs already), the delivery's
// row says so (ActivityAwaitDone).
//
// The child is abandoned if the lane's run ends first (an operator terminates it): the delivery
// goes on, and the lane's next run waits for it. Canceling the lane cancels no delivery.
func runInLane(ctx workflow.Context, in LaneInput, w model.LaneWork) error {
	cin := in.Delivery
	cin.DeliveryID, cin.EventID, cin.WebhookID, cin.Variant, cin.EventType = w.DeliveryID, w.EventID, w.WebhookID, w.Variant, w.EventType
	cin.PriorAttempts = w.Attempts
	child := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            DeliveryWorkflowID(w.EventID, w.WebhookID),
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		ParentClosePolicy:     enums.PARENT_CLOSE_POLICY_ABANDON,
		Priority:              temporal.Priority{FairnessKey: in.FairnessKey},
		StaticSummary:         fmt.Sprintf("%s, number %d in lane %d", w.EventType, w.Seq, w.LaneID),
		StaticDetails: fmt.Sprintf("delivery %d of event %d to webhook %d (variant %s), number %d in ordered lane %d",
			w.DeliveryID, w.EventID, w.WebhookID, w.Variant, w.Seq, w.LaneID),
	})
	dctx, _ := workflow.NewDisconnectedContext(child)
	var st DeliveryState
	err := workflow.ExecuteChildWorkflow(dctx, DeliveryWorkflow, cin).Get(ctx, &st)
	switch {
	case err == nil && (st.State == model.DeliveryDelivered || st.State == model.DeliveryCanceled):
		return nil
	case temporal.IsCanceledError(err):
		return nil // skipped by its owner, or its webhook deleted
	}
	var already *temporal.ChildWorkflowExecutionAlreadyStartedError
	if err != nil && !errors.As(err, &already) {
		workflow.GetLogger(ctx).Warn("lane's delivery ended undone; the lane waits for it", "delivery", w.DeliveryID, "err", err)
	}
	// Retried with the database's backoff until the delivery is done: its workflow failed (a
	// manual retry runs it again) or runs outside the lane.
	await := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:             fmt.Sprintf("wait for delivery %d, number %d", w.DeliveryID, w.Seq),
	})
	return workflow.ExecuteActivity(await, ActivityAwaitDone, w.DeliveryID).Get(ctx, nil)
}
