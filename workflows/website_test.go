package workflows_test

import (
	"context"
	"testing"
	"time"

	"errors"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/dispatch"
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
			func(_ context.Context, in activities.PublishWebsiteInput) (int64, error) {
				if in.WebsiteID != 7 || !in.ScheduledAt.Equal(at) {
					t.Errorf("activity input = %+v", in)
				}
				calls = append(calls, env.Now())
				return 0, nil
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

// TestWebsitePublishWorkflowStartsTheEventsDeliveries: the published event's deliveries are
// started by dispatch's activity, with the event's id; a failure to start them is left to the
// sweeper (they are in the outbox) and does not fail the publication.
func TestWebsitePublishWorkflowStartsTheEventsDeliveries(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(testLogger(t))
		env := suite.NewTestWorkflowEnvironment()
		env.SetStartTime(start)
		var a *activities.Activities
		var d *dispatch.Activities
		env.OnActivity(a.PublishScheduledWebsite, mock.Anything, mock.Anything).Return(int64(42), nil)
		var started []int64
		env.OnActivity(d.StartEventDeliveries, mock.Anything, mock.Anything).Return(func(_ context.Context, eventID int64) error {
			started = append(started, eventID)
			if fail {
				return errors.New("start delivery:42:1: connection refused")
			}
			return nil
		})
		env.ExecuteWorkflow(workflows.WebsitePublishWorkflow, workflows.WebsitePublishInput{WebsiteID: 7, ScheduledAt: start})
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
			t.Fatalf("fail=%v: completed %v, error %v", fail, env.IsWorkflowCompleted(), env.GetWorkflowError())
		}
		want := 1
		if fail {
			want = 3 // its retry policy's attempts, then the sweeper's turn
		}
		if len(started) != want || started[0] != 42 {
			t.Errorf("fail=%v: StartEventDeliveries calls %v, want %d for event 42", fail, started, want)
		}
	}
}
