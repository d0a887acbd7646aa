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

func (p *countingPublisher) Publish(context.Context, Message) error {
	if p.closed.Load() != 0 {
		return errClosed
	}
	return nil
}
func (p *countingPublisher) Close() error { p.closed.Add(1); return nil }

var errClosed = &Refusal{Class: ClassBrokerRefused, Message: "closed"}

// TestPoolKeepsOnePublisherPerWebhookVersion: concurrent attempts of one webhook open one
// publisher; a new version of the webhook's destination gets a new one and the old is closed once
// the publishes in flight on it end, never under them; the sweep closes the publishers of webhooks
// deleted or changed, and those idle too long.
func TestPoolKeepsOnePublisherPerWebhookVersion(t *testing.T) {
	var mu sync.Mutex
	var opened []*countingPublisher
	live := map[int64]string{}
	p := &Pool{
		Open: func(context.Context, Target) (Publisher, error) {
			mu.Lock()
			defer mu.Unlock()
			pub := &countingPublisher{}
			opened = append(opened, pub)
			return pub, nil
		},
		Live: func(_ context.Context, ids []int64) (map[int64]string, error) {
			mu.Lock()
			defer mu.Unlock()
			out := map[int64]string{}
			for _, id := range ids {
				if v, ok := live[id]; ok {
					out[id] = v
				}
			}
			return out, nil
		},
	}
	ctx := context.Background()
	target := func() Target { return Target{} }
	get := func(id int64, version string) (Publisher, func()) {
		t.Helper()
		pub, release, err := p.Get(ctx, id, version, target)
		if err != nil {
			t.Fatal(err)
		}
		return pub, release
	}
	live[1], live[2] = "v1", "v1"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, release, err := p.Get(ctx, 1, "v1", target)
			if err != nil {
				t.Error(err)
				return
			}
			release()
		})
	}
	wg.Wait()
	if len(opened) != 1 {
		t.Fatalf("8 concurrent attempts opened %d publishers, want 1", len(opened))
	}

	// A publish in flight on v1 when an attempt reads v2: v1 is closed after it, not under it.
	inFlight, releaseInFlight := get(1, "v1")
	_, release := get(1, "v2")
	release()
	time.Sleep(20 * time.Millisecond) // a close that must not come
	if err := inFlight.Publish(ctx, Message{}); err != nil || opened[0].closed.Load() != 0 {
		t.Fatalf("the publisher in use was closed under its publish: %v", err)
	}
	releaseInFlight()
	poolEventually(t, func() bool { return opened[0].closed.Load() == 1 })

	_, release = get(2, "v1")
	release()
	if p.Len() != 2 {
		t.Fatalf("pool holds %d publishers, want 2", p.Len())
	}
	// Webhook 1's destination changed again (v2 is not live any more) and webhook 2 was deleted.
	mu.Lock()
	live[1] = "v3"
	delete(live, 2)
	mu.Unlock()
	p.Sweep(ctx)
	poolEventually(t, func() bool { return opened[1].closed.Load() == 1 && opened[2].closed.Load() == 1 })
	if p.Len() != 0 {
		t.Fatalf("after the sweep: %d open", p.Len())
	}
	// An idle publisher of a live webhook is closed after IdleTimeout; one in use is not.
	p.IdleTimeout = time.Nanosecond
	_, release = get(1, "v3")
	time.Sleep(time.Millisecond)
	p.Sweep(ctx)
	if p.Len() != 1 {
		t.Fatal("the sweep retired a publisher in use as idle")
	}
	release()
	time.Sleep(time.Millisecond)
	p.Sweep(ctx)
	poolEventually(t, func() bool { return p.Len() == 0 && opened[3].closed.Load() == 1 })
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
