package workflows_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/workflows"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

// historyFiles are the recorded DeliveryWorkflow histories that every change must still replay.
func historyFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "delivery-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/delivery-*.json (go test -tags record -run TestRecord ./workflows/ records them)")
	}
	return files
}

// TestReplayDeliveryHistories replays the recorded histories against today's DeliveryWorkflow: a
// change to its sequence of commands that is not behind workflow.GetVersion fails here, before it
// breaks the deliveries running in production.
func TestReplayDeliveryHistories(t *testing.T) {
	for _, file := range historyFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.DeliveryWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
		})
	}

	// The replay can fail: a workflow that sleeps before doing what DeliveryWorkflow does issues a
	// timer where the history holds the first Deliver activity.
	t.Run("altered workflow is nondeterministic", func(t *testing.T) {
		altered := func(ctx workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryState, error) {
			if err := workflow.Sleep(ctx, time.Second); err != nil {
				return workflows.DeliveryState{}, err
			}
			return workflows.DeliveryWorkflow(ctx, in)
		}
		for _, file := range historyFiles(t) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(altered, workflow.RegisterOptions{Name: "DeliveryWorkflow"})
			// The SDK logs the expected panic with its stack; keep it out of the test's log.
			err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), file)
			// TMPRL1100 is the SDK's code for a history that the workflow code does not reproduce.
			if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
				t.Errorf("replay of %s with an altered workflow: err = %v, want a nondeterminism error", file, err)
			}
		}
	})
}

// websiteHistory is the recorded WebsitePublishWorkflow run that every change must still replay.
const websiteHistory = "testdata/website-publish.json"

// TestReplayWebsitePublishHistory replays a recorded scheduled publication.
func TestReplayWebsitePublishHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.WebsitePublishWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), websiteHistory); err != nil {
		t.Fatalf("replay %s: %v", websiteHistory, err)
	}
	// And it can fail: publishing without waiting for the timer is another sequence of commands.
	eager := func(ctx workflow.Context, in workflows.WebsitePublishInput) error {
		in.ScheduledAt = time.Time{}
		return workflows.WebsitePublishWorkflow(ctx, in)
	}
	r = worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(eager, workflow.RegisterOptions{Name: "WebsitePublishWorkflow"})
	err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), websiteHistory)
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Errorf("replay with a workflow that skips the timer: err = %v, want a nondeterminism error", err)
	}
}

// fanOutHistory is the recorded FanOutWorkflow run (its activity failed once, then succeeded).
const fanOutHistory = "testdata/fanout.json"

// TestReplayFanOutHistory replays a recorded fan-out, and shows the replay can fail: a workflow
// that waits before starting the deliveries issues a timer where the history holds the activity.
func TestReplayFanOutHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.FanOutWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), fanOutHistory); err != nil {
		t.Fatalf("replay %s: %v", fanOutHistory, err)
	}
	late := func(ctx workflow.Context, in workflows.FanOutInput) error {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return err
		}
		return workflows.FanOutWorkflow(ctx, in)
	}
	r = worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(late, workflow.RegisterOptions{Name: "FanOutWorkflow"})
	err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), fanOutHistory)
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Errorf("replay with a workflow that waits first: err = %v, want a nondeterminism error", err)
	}
}

// recoverHistory is the recorded RecoverWorkflow run (its activity failed once, then retried 3).
const recoverHistory = "testdata/recover.json"

// TestReplayRecoverHistory replays a recorded recovery.
func TestReplayRecoverHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.RecoverWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), recoverHistory); err != nil {
		t.Fatalf("replay %s: %v", recoverHistory, err)
	}
}

// retryWebhookHistory is the recorded RetryWebhookWorkflow run (its activity failed once, then
// retried 3).
const retryWebhookHistory = "testdata/retry-webhook.json"

// TestReplayRetryWebhookHistory replays a recorded webhook-wide retry, and shows the replay can
// fail: a workflow that waits before the activity issues a timer where the history holds it.
func TestReplayRetryWebhookHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.RetryWebhookWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), retryWebhookHistory); err != nil {
		t.Fatalf("replay %s: %v", retryWebhookHistory, err)
	}
	late := func(ctx workflow.Context, in workflows.RetryWebhookInput) (int, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return 0, err
		}
		return workflows.RetryWebhookWorkflow(ctx, in)
	}
	r = worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(late, workflow.RegisterOptions{Name: "RetryWebhookWorkflow"})
	err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), retryWebhookHistory)
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Errorf("replay with a workflow that waits first: err = %v, want a nondeterminism error", err)
	}
}

// replayHistory is the recorded ReplayWorkflow run (its activity failed once, then sent 3).
const replayHistory = "testdata/replay.json"

// TestReplayReplayHistory replays a recorded replay (issue 46), and shows the replay can fail: a
// workflow that waits before the activity issues a timer where the history holds it.
func TestReplayReplayHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflows.ReplayWorkflow)
	if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), replayHistory); err != nil {
		t.Fatalf("replay %s: %v", replayHistory, err)
	}
	late := func(ctx workflow.Context, in workflows.ReplayInput) (int, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return 0, err
		}
		return workflows.ReplayWorkflow(ctx, in)
	}
	r = worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(late, workflow.RegisterOptions{Name: "ReplayWorkflow"})
	err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), replayHistory)
	if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Errorf("replay with a workflow that waits first: err = %v, want a nondeterminism error", err)
	}
}
