package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/activities"
)

// WebsitePublishWorkflowID is the one scheduled publication of a website: scheduling again
// replaces it, publishing by hand or archiving cancels it.
func WebsitePublishWorkflowID(websiteID int64) string {
	return fmt.Sprintf("website-publish:%d", websiteID)
}

// WebsitePublishInput starts a WebsitePublishWorkflow.
type WebsitePublishInput struct {
	WebsiteID   int64
	ScheduledAt time.Time
}

// WebsitePublishWorkflow sleeps on a durable timer until the scheduled time, then publishes the
// website and starts the deliveries of its website.published event. A worker restart in between
// does not matter: the timer lives in Temporal.
func WebsitePublishWorkflow(ctx workflow.Context, in WebsitePublishInput) error {
	if d := in.ScheduledAt.Sub(workflow.Now(ctx)); d > 0 {
		if err := workflow.Sleep(ctx, d); err != nil {
			return err
		}
	}
	var a *activities.Activities
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
	})
	var eventID int64
	if err := workflow.ExecuteActivity(ctx, a.PublishScheduledWebsite, activities.PublishWebsiteInput{WebsiteID: in.WebsiteID, ScheduledAt: in.ScheduledAt}).Get(ctx, &eventID); err != nil {
		return err
	}
	if eventID == 0 {
		return nil // a stale schedule, or an event no webhook listens to
	}
	// The event is committed and its deliveries are in the outbox: should their start fail, the
	// worker's sweeper starts them, so a failure here is logged, not retried for long.
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	if err := workflow.ExecuteActivity(ctx, ActivityStartEventDeliveries, eventID).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("start deliveries; the sweeper will", "event", eventID, "err", err)
	}
	return nil
}
