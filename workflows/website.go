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
// website. A worker restart in between does not matter: the timer lives in Temporal.
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
	return workflow.ExecuteActivity(ctx, a.PublishScheduledWebsite, activities.PublishWebsiteInput{WebsiteID: in.WebsiteID, ScheduledAt: in.ScheduledAt}).Get(ctx, nil)
}
