package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
)

// heldStarts is a Temporal client whose starts wait until released, counting each fairness key's
// starts in flight and the most there ever were.
type heldStarts struct {
	client.Client
	release chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	by, top map[string]int
}

func newHeldStarts() *heldStarts {
	h := &heldStarts{release: make(chan struct{}), by: map[string]int{}, top: map[string]int{}}
	h.cond = sync.NewCond(&h.mu)
	return h
}

func (h *heldStarts) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	key := opts.Priority.FairnessKey
	h.mu.Lock()
	h.by[key]++
	h.top[key] = max(h.top[key], h.by[key])
	h.cond.Broadcast()
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.by[key]--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// awaitInFlight waits until key has n starts in flight.
func (h *heldStarts) awaitInFlight(key string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.by[key] < n {
		h.cond.Wait()
	}
}

// TestAccountShareOfStarts is issue 40's first path at the dispatcher: however many fan-outs of one
// account start its deliveries at once, at most 8 of its starts are in flight in the process (in
// the Temporal server's queue), and another account's start goes while they wait, instead of
// behind them. Each start here waits until released, as a saturated server would keep it.
func TestAccountShareOfStarts(t *testing.T) {
	h := newHeldStarts()
	d := &dispatch.Dispatcher{Client: h, TaskQueue: "shares"}
	refs := func(account int64, n int) []model.DeliveryRef {
		out := make([]model.DeliveryRef, n)
		for i := range out {
			out[i] = model.DeliveryRef{DeliveryID: account*1000 + int64(i), EventID: account, WebhookID: int64(i), AccountID: account,
				Variant: model.VariantA, EventType: "campaign.created"}
		}
		return out
	}
	var wg sync.WaitGroup
	for range 4 { // four fan-outs of account 1, 16 starts each at most
		wg.Go(func() {
			if _, err := dispatch.StartWorkflows(t.Context(), d, refs(1, 40)); err != nil {
				t.Error(err)
			}
		})
	}
	noisy, quiet := dispatch.FairnessKey(1), dispatch.FairnessKey(2)
	// Every start of account 1's holds a slot or waits for one: 64 (4 fan-outs x 16) but 8.
	deadline := time.Now().Add(10 * time.Second)
	for dispatch.StartsWaiting(d, 1) != 64-8 {
		if time.Now().After(deadline) {
			h.mu.Lock()
			t.Fatalf("account 1: %d starts waiting for its share, %d in flight; want 56 and 8", dispatch.StartsWaiting(d, 1), h.by[noisy])
		}
		time.Sleep(time.Millisecond)
	}
	h.awaitInFlight(noisy, 8)
	wg.Go(func() {
		if _, err := dispatch.StartWorkflows(t.Context(), d, refs(2, 1)); err != nil {
			t.Error(err)
		}
	})
	// Account 2's start reaches the server while account 1's 160 are held, all but 8 of them in
	// the process: it waits for no slot of account 1's.
	h.awaitInFlight(quiet, 1)
	close(h.release)
	wg.Wait()
	if got := h.top[noisy]; got != 8 {
		t.Errorf("account 1 had up to %d starts in flight at once, want its share of 8", got)
	}
}
