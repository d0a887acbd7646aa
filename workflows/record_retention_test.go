//go:build record

package workflows_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRecordRetentionHistories is a generator like TestRecordHistories, for the Retention workflow,
// with a stand-in PurgeExpired: testdata/retention-batches.json is a pass of three batches in one
// run, testdata/retention-continued.json a run that reaches its bound of two batches and continues
// as new.
//
//	go test -tags record -run TestRecordRetentionHistories -count=1 ./workflows/
func TestRecordRetentionHistories(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-retention-%d", time.Now().UnixNano())
	var calls atomic.Int32
	purge := func(_ context.Context, in activities.PurgeInput) (model.PurgeBatch, error) {
		n := calls.Add(1)
		key := model.PurgeKey{CreatedAt: in.Before.Add(-time.Duration(10-n) * time.Hour), ID: int64(n) * 1000}
		next := model.PurgeCursor{Delivery: key, Event: key}
		if n%3 != 0 {
			return model.PurgeBatch{Purged: model.Purged{Attempts: 1200, Deliveries: 450, Events: 300}, Next: next}, nil
		}
		return model.PurgeBatch{Purged: model.Purged{Deliveries: 2, Events: 3}, Next: next, Done: true}, nil
	}
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.Retention)
	w.RegisterActivityWithOptions(purge, activity.RegisterOptions{Name: "PurgeExpired"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	for _, sc := range []struct {
		name       string
		maxBatches int
	}{{"batches", 100}, {"continued", 2}} {
		t.Run(sc.name, func(t *testing.T) {
			calls.Store(0)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.RetentionScheduleID(queue) + "-" + sc.name, TaskQueue: queue},
				workflows.Retention, workflows.RetentionInput{Retention: 720 * time.Hour, BatchSize: 500, MaxBatches: sc.maxBatches})
			if err != nil {
				t.Fatal(err)
			}
			// Get follows a continued run to the end of its chain (and GetRunID with it); the history
			// recorded is the first run's.
			firstRun := run.GetRunID()
			var res workflows.RetentionResult
			if err := run.Get(ctx, &res); err != nil {
				t.Fatal(err)
			}
			hist, err := fetchHistory(ctx, c, run.GetID(), firstRun)
			if err != nil {
				t.Fatal(err)
			}
			data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
			if err != nil {
				t.Fatal(err)
			}
			file := "testdata/retention-" + sc.name + ".json"
			if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.Retention)
			if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), file); err != nil {
				t.Fatalf("replay the recorded %s: %v", file, err)
			}
			t.Logf("recorded %s: %d events", file, len(hist.Events))
		})
	}
}
