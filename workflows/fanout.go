package workflows

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/model"
)

// FanOutThreshold is the number of deliveries above which an event's delivery workflows are started
// by a FanOutWorkflow rather than by the request that stored it: the request starts one workflow
// and answers, however many webhooks the event reaches. At or below it the request starts them
// itself, FanOutThreshold at a time (startConcurrency), in one round trip's time.
const FanOutThreshold = startConcurrency

// fanOutBatch is how many delivery workflows StartDeliveries starts between two heartbeats.
const fanOutBatch = 100

// FanOutWorkflowID names the one FanOutWorkflow of an event.
func FanOutWorkflowID(eventID int64) string { return fmt.Sprintf("fanout:%d", eventID) }

// FanOutInput starts a FanOutWorkflow: the event whose deliveries it starts.
type FanOutInput struct {
	EventID int64
}

// FanOutWorkflow starts the delivery workflows of one event with many webhooks, so the request
// that stored the event starts only this one. Each delivery keeps its own workflow
// (delivery:<event>:<webhook>), searchable as any other. The activity resumes where it stopped
// after a crash (its heartbeat), and starting a delivery twice is harmless.
func FanOutWorkflow(ctx workflow.Context, in FanOutInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    time.Minute,
		// Temporal or the database away: keep trying, as the sweeper would.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	var s *DispatchActivities
	return workflow.ExecuteActivity(ctx, s.StartDeliveries, in).Get(ctx, nil)
}

// DispatchActivities starts and retries delivery workflows from other workflows (FanOutWorkflow,
// RecoverWorkflow). It lives here, beside the Starter, because activities cannot import this
// package.
type DispatchActivities struct {
	DB      *bun.DB
	Starter *Starter
}

// StartDeliveries starts the delivery workflows of in.EventID, fanOutBatch at a time. They are
// recorded dispatched already: DispatchEvent did when it started this workflow. Its heartbeat
// carries how many it has started, so a retry skips those.
func (f *DispatchActivities) StartDeliveries(ctx context.Context, in FanOutInput) error {
	refs, err := model.EventDeliveryRefs(ctx, f.DB, in.EventID)
	if err != nil {
		return err
	}
	done := 0
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &done)
	}
	for done < len(refs) {
		batch := refs[done:min(done+fanOutBatch, len(refs))]
		if _, err := f.Starter.startCounted(ctx, batch, StartedByFanOut); err != nil {
			return err
		}
		done += len(batch)
		activity.RecordHeartbeat(ctx, done)
	}
	activity.GetLogger(ctx).Info("fan-out started", "event", in.EventID, "deliveries", len(refs))
	return nil
}

// startFanOut starts the FanOutWorkflow of an event; one that already exists counts as started.
func (s *Starter) startFanOut(ctx context.Context, eventID, accountID int64) error {
	_, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       FanOutWorkflowID(eventID),
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Priority:                 temporal.Priority{FairnessKey: FairnessKey(accountID)},
		EnableEagerStart:         s.EagerStart,
	}, FanOutWorkflow, FanOutInput{EventID: eventID})
	if err != nil && !isAlreadyStarted(err) {
		return fmt.Errorf("start %s: %w", FanOutWorkflowID(eventID), err)
	}
	return nil
}
