//go:build integration

package dispatch_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestStartFansOutAndCountsExistingWorkflows: start starts every delivery of a fan-out (several at
// a time), a second start finds them all started, and a caller that gives up mid-way gets what was
// started with the error, so the caller marks only those dispatched. No worker polls the
// queue: the workflows only need to exist.
func TestStartFansOutAndCountsExistingWorkflows(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := "start-" + time.Now().Format("150405.000000000")
	s := &dispatch.Dispatcher{Client: c, TaskQueue: queue, Schedule: []time.Duration{time.Minute}, RetryWindow: time.Hour, AttemptTimeout: time.Second}
	base := time.Now().UnixNano() % 1_000_000_000
	refs := func(n int, from int64) []model.DeliveryRef {
		var out []model.DeliveryRef
		for i := range int64(n) {
			out = append(out, model.DeliveryRef{DeliveryID: from + i, EventID: base, WebhookID: from + i, AccountID: 1,
				Variant: model.VariantA, EventType: "campaign.created"})
		}
		return out
	}
	ids := func(rs []model.DeliveryRef) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.DeliveryID)
		}
		return out
	}

	batch := refs(100, 1)
	started, err := dispatch.StartWorkflows(t.Context(), s, batch)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(started)
	if !slices.Equal(started, ids(batch)) {
		t.Fatalf("started %d of %d: %v", len(started), len(batch), started)
	}
	for _, r := range []model.DeliveryRef{batch[0], batch[99]} {
		desc, err := c.DescribeWorkflowExecution(t.Context(), workflows.DeliveryWorkflowID(r.EventID, r.WebhookID), "")
		if err != nil {
			t.Fatalf("delivery %d has no workflow: %v", r.DeliveryID, err)
		}
		if desc.WorkflowExecutionInfo.GetTaskQueue() != queue {
			t.Fatalf("delivery %d on queue %q", r.DeliveryID, desc.WorkflowExecutionInfo.GetTaskQueue())
		}
	}

	// Again (the sweeper after an API start whose dispatch mark was lost): all count as started.
	again, err := dispatch.StartWorkflows(t.Context(), s, batch)
	if err != nil || len(again) != len(batch) {
		t.Fatalf("second start: %d of %d, %v", len(again), len(batch), err)
	}

	// The caller gives up mid-way (its context ends after the 50th start was sent): an error, and
	// the ids of workflows that exist, no others. Starts go 16 at a time, so at least 34 had
	// completed when the 50th was sent.
	more := refs(300, 1000)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.Client = &cancelAfter{Client: c, after: 50, cancel: cancel}
	partial, err := dispatch.StartWorkflows(ctx, s, more)
	if err == nil || len(partial) < 34 || len(partial) >= len(more) {
		t.Fatalf("canceled mid-way: %d of %d started, err %v", len(partial), len(more), err)
	}
	for _, id := range partial {
		if _, err := c.DescribeWorkflowExecution(t.Context(), workflows.DeliveryWorkflowID(base, id), ""); err != nil {
			t.Errorf("delivery %d reported started but has no workflow: %v", id, err)
		}
	}
}

// cancelAfter is the real client, calling cancel when the given start is sent.
type cancelAfter struct {
	client.Client
	n      atomic.Int64
	after  int64
	cancel func()
}

func (c *cancelAfter) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if c.n.Add(1) == c.after {
		c.cancel()
	}
	return c.Client.ExecuteWorkflow(ctx, opts, wf, args...)
}
