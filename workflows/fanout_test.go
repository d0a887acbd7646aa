package workflows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/workflows"
)

// TestFanOutWorkflowRetriesUntilStarted: the fan-out runs StartDeliveries for its event, and an
// infrastructure failure (Temporal or the database away) is retried, not given up.
func TestFanOutWorkflowRetriesUntilStarted(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger(t))
	env := suite.NewTestWorkflowEnvironment()
	var s *dispatch.Activities
	var calls []workflows.FanOutInput
	env.OnActivity(s.StartDeliveries, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.FanOutInput) error {
		calls = append(calls, in)
		if len(calls) < 3 {
			return errors.New("start delivery:7:1: connection refused")
		}
		return nil
	})
	env.ExecuteWorkflow(workflows.FanOutWorkflow, workflows.FanOutInput{EventID: 7})
	if !env.IsWorkflowCompleted() {
		t.Fatal("fan-out did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("fan-out failed: %v", err)
	}
	if len(calls) != 3 || calls[0].EventID != 7 || calls[2].EventID != 7 {
		t.Errorf("StartDeliveries calls = %+v, want three for event 7", calls)
	}
}
