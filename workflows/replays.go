package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// ActivityReplayDeliveries sends a replay's deliveries again (ReplayInput); it returns how many it
// sent.
const ActivityReplayDeliveries = "ReplayDeliveries"

// ReplayInput starts a ReplayWorkflow: the replay, whose row holds its deliveries and progress.
type ReplayInput struct {
	ReplayID int64
}

// ReplayWorkflowID names the one workflow of a replay.
func ReplayWorkflowID(replayID int64) string { return fmt.Sprintf("replay:%d", replayID) }

// ReplayWorkflow sends again the deliveries a replay matched when it was created, in one activity
// that claims and hands over one delivery at a time, as RecoverWorkflow does; its progress is in
// the replay's row, so after a crash it resumes after the last delivery it handled. Canceling the
// workflow cancels the activity; the replay's row was marked canceled first, which stops it too.
func ReplayWorkflow(ctx workflow.Context, in ReplayInput) (int, error) {
	return runBatchRetry(ctx, fmt.Sprintf("replay %d", in.ReplayID), ActivityReplayDeliveries, in)
}
