package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Activities of package dispatch that workflows run. They are called by registered name, because
// dispatch imports this package (it starts these workflows); dispatch's tests check that its
// Activities has a method of each name.
const (
	// ActivityStartDeliveries starts the delivery workflows of an event (FanOutInput).
	ActivityStartDeliveries = "StartDeliveries"
	// ActivityStartEventDeliveries starts the delivery workflows of an event a workflow emitted
	// (its id) and records them dispatched.
	ActivityStartEventDeliveries = "StartEventDeliveries"
	// ActivityRecoverDeliveries retries a recovery's deliveries (RecoverInput); it returns how many.
	ActivityRecoverDeliveries = "RecoverDeliveries"
	// ActivityRetryExhausted retries a webhook's exhausted deliveries (RetryWebhookInput); it
	// returns how many.
	ActivityRetryExhausted = "RetryExhausted"
)

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
	return workflow.ExecuteActivity(ctx, ActivityStartDeliveries, in).Get(ctx, nil)
}
