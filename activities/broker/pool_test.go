package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type countingPublisher struct {
	closed atomic.Int32
}

func (p *countingPublisher) Publish(context.Context, Message) error { return nil }
func (p *countingPublisher) Close() error                           { p.closed.Add(1); return nil }

// TestPoolKeepsOnePublisherPerWebhookVersion: concurrent attempts of one webhook open one
// publisher; a new version of the webhook (a change) gets a new one and the old is closed; the sweep
// closes the publishers of webhooks deleted or changed, and those idle too long.
func TestPoolKeepsOnePublisherPerWebhookVersion(t *testing.T) {
	var mu sync.Mutex
	var opened []*countingPublisher
	live := map[int64]time.Time{}
	p := &Pool{
		Open: func(context.Context, Target) (Publisher, error) {
			mu.Lock()
			defer mu.Unlock()
			pub := &countingPublisher{}
			opened = append(opened, pub)
			return pub, nil
		},
		Live: func(_ context.Context, ids []int64) (map[int64]time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			out := map[int64]time.Time{}
			for _, id := range ids {
				if v, ok := live[id]; ok {
					out[id] = v
				}
			}
			return out, nil
		},
	}
	ctx := context.Background()
	v1, v2 := time.Unix(100, 0), time.Unix(200, 0)
	live[1], live[2] = v1, v1
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.Get(ctx, 1, v1, func() Target { return Target{} }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(opened) != 1 {
		t.Fatalf("8 concurrent attempts opened %d publishers, want 1", len(opened))
	}
	if _, err := p.Get(ctx, 1, v2, func() Target { return Target{} }); err != nil {
		t.Fatal(err)
	}
	poolEventually(t, func() bool { return opened[0].closed.Load() == 1 })
	if _, err := p.Get(ctx, 2, v1, func() Target { return Target{} }); err != nil {
		t.Fatal(err)
	}
	if p.Len() != 2 {
		t.Fatalf("pool holds %d publishers, want 2", p.Len())
	}
	// Webhook 1 was changed again (v2 is not live any more) and webhook 2 deleted.
	mu.Lock()
	live[1] = time.Unix(300, 0)
	delete(live, 2)
	mu.Unlock()
	p.Sweep(ctx)
	if p.Len() != 0 || opened[1].closed.Load() != 1 || opened[2].closed.Load() != 1 {
		t.Fatalf("after the sweep: %d open, closes %d %d", p.Len(), opened[1].closed.Load(), opened[2].closed.Load())
	}
	// An idle publisher of a live webhook is closed after IdleTimeout.
	p.IdleTimeout = time.Nanosecond
	if _, err := p.Get(ctx, 1, time.Unix(300, 0), func() Target { return Target{} }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	p.Sweep(ctx)
	if p.Len() != 0 || opened[3].closed.Load() != 1 {
		t.Fatalf("idle publisher kept: %d open", p.Len())
	}
	p.Close()
}

func poolEventually(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met in 10 s")
}

// A Refusal is the broker's answer to the egress turn (egress.Answer), which the breakers count as
// a reply, not as a failure to reach the broker: without it, refusals opened the endpoint's breaker
// (TestDestinationFailingNotifiesOnce, e2e).
var _ interface {
	error
	Overloaded() bool
} = (*Refusal)(nil)
