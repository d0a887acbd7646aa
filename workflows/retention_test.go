package workflows_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRetentionWorkflow: batches run until the pass is done, every batch with the cutoff fixed at
// the pass's start and the cursor the previous batch returned; a run that reaches its batch bound
// continues as new with the pass's cutoff and cursor; a database error that outlasts the retries
// fails the run.
func TestRetentionWorkflow(t *testing.T) {
	const retention = 720 * time.Hour
	wantBefore := start.Add(-retention)
	// batch i (from 1) returns a cursor at id i, so each call's input shows which batch it follows.
	batch := func(i int, p model.Purged, done bool) model.PurgeBatch {
		key := model.PurgeKey{CreatedAt: wantBefore.Add(-time.Duration(100-i) * time.Hour), ID: int64(i)}
		return model.PurgeBatch{Purged: p, Next: model.PurgeCursor{Delivery: key, Event: key}, Done: done}
	}
	for _, tc := range []struct {
		name       string
		in         workflows.RetentionInput
		batches    []model.PurgeBatch // what each PurgeExpired call returns
		wantCalls  int
		wantResult model.Purged
		wantCAN    bool
	}{
		{"nothing expired", workflows.RetentionInput{MaxBatches: 10}, []model.PurgeBatch{batch(1, model.Purged{}, true)}, 1, model.Purged{}, false},
		{"three batches", workflows.RetentionInput{MaxBatches: 10},
			[]model.PurgeBatch{batch(1, model.Purged{Attempts: 9, Deliveries: 3}, false), batch(2, model.Purged{Deliveries: 1, Events: 2}, false),
				batch(3, model.Purged{Events: 2}, true)},
			3, model.Purged{Attempts: 9, Deliveries: 4, Events: 4}, false},
		{"bound reached: continues as new", workflows.RetentionInput{MaxBatches: 2},
			[]model.PurgeBatch{batch(1, model.Purged{Attempts: 3}, false), batch(2, model.Purged{Attempts: 3}, false), batch(3, model.Purged{}, true)},
			2, model.Purged{}, true},
		{"a continued pass keeps its cutoff and cursor",
			workflows.RetentionInput{MaxBatches: 10, Before: wantBefore, After: batch(7, model.Purged{}, false).Next},
			[]model.PurgeBatch{batch(8, model.Purged{Events: 1}, true)}, 1, model.Purged{Events: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetStartTime(start)
			if !tc.in.Before.IsZero() {
				// A continued run starts later than its pass did; the cutoff stays the pass's.
				env.SetStartTime(start.Add(90 * time.Minute))
			}
			var a *activities.Activities
			var calls []activities.PurgeInput
			env.OnActivity(a.PurgeExpired, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.PurgeInput) (model.PurgeBatch, error) {
					calls = append(calls, in)
					return tc.batches[len(calls)-1], nil
				})
			in := tc.in
			in.Retention, in.BatchSize = retention, 3
			env.ExecuteWorkflow(workflows.Retention, in)
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if len(calls) != tc.wantCalls {
				t.Fatalf("%d PurgeExpired calls, want %d", len(calls), tc.wantCalls)
			}
			after := tc.in.After
			for i, c := range calls {
				if !c.Before.Equal(wantBefore) || c.Limit != 3 || c.After != after {
					t.Errorf("call %d: %+v, want cutoff %v, limit 3, after %+v", i+1, c, wantBefore, after)
				}
				after = tc.batches[i].Next
			}
			err := env.GetWorkflowError()
			if tc.wantCAN {
				var can *workflow.ContinueAsNewError
				if !errors.As(err, &can) || can.WorkflowType.Name != "Retention" {
					t.Fatalf("workflow error = %v, want continue-as-new", err)
				}
				var next workflows.RetentionInput
				if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
					t.Fatal(err)
				}
				if !next.Before.Equal(wantBefore) || next.After != after || next.Retention != retention || next.MaxBatches != tc.in.MaxBatches {
					t.Errorf("continued with %+v, want the cutoff %v and the cursor %+v", next, wantBefore, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("workflow error: %v", err)
			}
			var got workflows.RetentionResult
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if !got.Before.Equal(wantBefore) || got.Batches != tc.wantCalls || got.Purged != tc.wantResult {
				t.Errorf("result %+v, want cutoff %v, %d batches, %+v", got, wantBefore, tc.wantCalls, tc.wantResult)
			}
		})
	}

	t.Run("database away fails the run after bounded retries", func(t *testing.T) {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		var a *activities.Activities
		tries := 0
		env.OnActivity(a.PurgeExpired, mock.Anything, mock.Anything).Return(
			func(context.Context, activities.PurgeInput) (model.PurgeBatch, error) {
				tries++
				return model.PurgeBatch{}, errors.New("connection refused")
			})
		env.ExecuteWorkflow(workflows.Retention, workflows.RetentionInput{Retention: retention, BatchSize: 3, MaxBatches: 10})
		if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
			t.Fatalf("completed %v, error %v: want a failed run", env.IsWorkflowCompleted(), env.GetWorkflowError())
		}
		if tries != 8 {
			t.Errorf("PurgeExpired tried %d times, want 8 (the retry policy's bound)", tries)
		}
	})

	t.Run("bad input fails at once", func(t *testing.T) {
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		env.ExecuteWorkflow(workflows.Retention, workflows.RetentionInput{Retention: 0, BatchSize: 3, MaxBatches: 10})
		var appErr *temporal.ApplicationError
		if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeBadInput {
			t.Fatalf("workflow error = %v, want %s", err, activities.ErrTypeBadInput)
		}
	})
}

// TestReplayRetentionHistories replays the recorded Retention runs (testdata/retention-*.json: one
// that ends after a short batch, one that continues as new), and shows the replay can fail: a
// workflow that stops after its first batch issues other commands than the histories hold.
func TestReplayRetentionHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "retention-*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("recorded histories %v, %v (go test -tags record -run TestRecordRetentionHistories ./workflows/ records them)", files, err)
	}
	oneBatch := func(ctx workflow.Context, in workflows.RetentionInput) (workflows.RetentionResult, error) {
		in.MaxBatches = 1
		res, err := workflows.Retention(ctx, in)
		if workflow.IsContinueAsNewError(err) {
			err = nil
		}
		return res, err
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.Retention)
			if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), file); err != nil {
				t.Fatalf("replay %s: %v", file, err)
			}
			r = worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(oneBatch, workflow.RegisterOptions{Name: "Retention"})
			err := r.ReplayWorkflowHistoryFromJSONFile(log.NewStructuredLogger(slog.New(slog.DiscardHandler)), file)
			if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
				t.Errorf("replay with a workflow that stops after one batch: err = %v, want a nondeterminism error", err)
			}
		})
	}
}
