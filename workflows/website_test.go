package workflows_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/workflows"
)

// TestWebsitePublishWorkflow: the publication runs exactly at the scheduled time, once; a
// cancellation before then (archive, publish by hand) means it never runs.
func TestWebsitePublishWorkflow(t *testing.T) {
	at := start.Add(90 * time.Minute)
	for _, cancel := range []bool{false, true} {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		env.SetStartTime(start)
		var a *activities.Activities
		var calls []time.Time
		env.OnActivity(a.PublishScheduledWebsite, mock.Anything, mock.Anything).Return(
			func(_ context.Context, in activities.PublishWebsiteInput) error {
				if in.WebsiteID != 7 || !in.ScheduledAt.Equal(at) {
					t.Errorf("activity input = %+v", in)
				}
				calls = append(calls, env.Now())
				return nil
			})
		if cancel {
			env.RegisterDelayedCallback(env.CancelWorkflow, time.Hour)
		}
		env.ExecuteWorkflow(workflows.WebsitePublishWorkflow, workflows.WebsitePublishInput{WebsiteID: 7, ScheduledAt: at})
		if !env.IsWorkflowCompleted() {
			t.Fatal("workflow did not complete")
		}
		switch {
		case cancel && len(calls) != 0:
			t.Fatalf("canceled schedule still published at %v", calls)
		case cancel && env.GetWorkflowError() == nil:
			t.Fatal("a canceled workflow reported success")
		case !cancel && (len(calls) != 1 || !calls[0].Equal(at)):
			t.Fatalf("published at %v, want once at %v", calls, at)
		case !cancel && env.GetWorkflowError() != nil:
			t.Fatalf("workflow error: %v", env.GetWorkflowError())
		}
	}
}
