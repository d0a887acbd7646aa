//go:build integration

package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/grpc"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/worker"
)

// stickyProbe watches a worker's workflow task polls. While stale is set, an answer from the sticky
// queue that carries a task says that more wait there (BacklogCountHint 5), as the server's
// count may say after the queue has drained; it counts the sticky polls answered empty, which
// the server does only when its long poll (a minute) expires.
type stickyProbe struct {
	stale       atomic.Bool
	emptySticky atomic.Int64
}

func (p *stickyProbe) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	poll, ok := req.(*workflowservice.PollWorkflowTaskQueueRequest)
	if err != nil || !ok || poll.GetTaskQueue().GetKind() != enumspb.TASK_QUEUE_KIND_STICKY {
		return err
	}
	resp := reply.(*workflowservice.PollWorkflowTaskQueueResponse)
	switch {
	case len(resp.GetTaskToken()) == 0:
		p.emptySticky.Add(1)
	case p.stale.Load():
		resp.BacklogCountHint = 5
	}
	return nil
}

func pollerWaiter(ctx workflow.Context) error {
	workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
	return nil
}

func pollerQuick(workflow.Context) error { return nil }

// TestStickyHintDoesNotStarveTheNormalQueue: a worker with MainWorkerOptions keeps polling the
// normal task queue while its sticky queue's last answer said that more tasks waited there. With
// the SDK's fixed pollers (4 of them, each taking the sticky queue whenever that hint is above
// zero), every poller went to the sticky queue and waited there for the server's long poll to
// expire, a minute, while new workflows queued on the normal one: the bare regular-activity tier
// of `make bench-e2e` stalled for 60 s at a time (issue 33). No clock is compared here: the new
// workflows must finish before any sticky poll comes back empty.
func TestStickyHintDoesNotStarveTheNormalQueue(t *testing.T) {
	srv := temporaltest.Start(t)
	probe := &stickyProbe{}
	c, err := client.DialContext(t.Context(), client.Options{
		HostPort:          srv.Address,
		Namespace:         srv.Namespace,
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(probe.intercept)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := fmt.Sprintf("pollers-%d", time.Now().UnixNano())
	w := sdkworker.New(c, queue, worker.MainWorkerOptions(10))
	w.RegisterWorkflowWithOptions(pollerWaiter, workflow.RegisterOptions{Name: "PollerWaiter"})
	w.RegisterWorkflowWithOptions(pollerQuick, workflow.RegisterOptions{Name: "PollerQuick"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	// A workflow cached on the worker, woken by a signal: its second task comes from the sticky
	// queue, with the stale hint.
	waiter, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue + "-waiter", TaskQueue: queue}, "PollerWaiter")
	if err != nil {
		t.Fatal(err)
	}
	// Its first task done, the server sends the next one to the worker's sticky queue.
	for {
		d, err := c.DescribeWorkflowExecution(ctx, waiter.GetID(), "")
		if err != nil {
			t.Fatal(err)
		}
		if d.GetPendingWorkflowTask() == nil && d.GetWorkflowExecutionInfo().GetHistoryLength() >= 4 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	probe.stale.Store(true)
	if err := c.SignalWorkflow(ctx, waiter.GetID(), "", "go", nil); err != nil {
		t.Fatal(err)
	}
	if err := waiter.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	emptyBefore := probe.emptySticky.Load()

	// More workflows than pollers, on the normal queue only.
	runs := make([]client.WorkflowRun, 16)
	for i := range runs {
		if runs[i], err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-quick-%d", queue, i), TaskQueue: queue}, "PollerQuick"); err != nil {
			t.Fatal(err)
		}
	}
	for i, run := range runs {
		if err := run.Get(ctx, nil); err != nil {
			t.Fatalf("workflow %d: %v", i, err)
		}
	}
	if n := probe.emptySticky.Load() - emptyBefore; n > 0 {
		t.Fatalf("%d sticky polls expired empty before 16 workflows on the normal queue were done: the pollers waited on the sticky queue while the normal one had tasks", n)
	}
}
