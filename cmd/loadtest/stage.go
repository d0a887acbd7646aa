package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// stage is what the hanging, isolation and sharedhost scenarios share: account C's one webhook at
// a healthy receiver, and account B's webhooks at a receiver that never answers (in sharedhost,
// both are paths of one receiver).
type stage struct {
	healthy *arrivals
	hanging *hangingReceiver
	c, b    *apiClient
	cHook   int64
	bHooks  []int64
	stops   []func()
}

// setUp starts both receivers and registers the webhooks. The healthy webhook's URL names
// cfg.healthyHost, the hanging ones the listening IP: two customers' receivers are two hosts, and
// a per-host limit must see them as such.
func setUp(ctx context.Context, cfg config, cert tls.Certificate, noisyHooks int) (*stage, error) {
	s := newStage(cfg)
	healthyAddr, stop, err := serveTLS(cfg.listen, cert, s.healthy)
	if err != nil {
		return nil, fmt.Errorf("healthy receiver: %w", err)
	}
	s.stops = append(s.stops, stop)
	hangAddr, stop, err := serveTLS(cfg.hangListen, cert, s.hanging)
	if err != nil {
		s.tearDown(ctx)
		return nil, fmt.Errorf("hanging receiver: %w", err)
	}
	s.stops = append(s.stops, stop)

	_, port, err := net.SplitHostPort(healthyAddr)
	if err != nil {
		s.tearDown(ctx)
		return nil, err
	}
	healthyURL := "https://" + net.JoinHostPort(cfg.healthyHost, port) + "/hook"
	if s.cHook, err = s.c.createWebhook(ctx, healthyURL); err != nil {
		s.tearDown(ctx)
		return nil, fmt.Errorf("account C (-key): %w", err)
	}
	for i := range noisyHooks {
		id, err := s.b.createWebhook(ctx, fmt.Sprintf("https://%s/hook/%d", hangAddr, i))
		if err != nil {
			s.tearDown(ctx)
			return nil, fmt.Errorf("account B (-noisy-key): %w", err)
		}
		s.bHooks = append(s.bHooks, id)
	}
	fmt.Printf("account C: webhook %d at %s (answers 204 at once)\n", s.cHook, healthyURL)
	fmt.Printf("account B: %d webhooks at https://%s/hook/... (reads the request, never answers)\n", noisyHooks, hangAddr)
	return s, nil
}

// newStage is a stage with its receivers' handlers and both accounts' clients, before any
// receiver listens or webhook is registered.
func newStage(cfg config) *stage {
	// Open-loop publishers run concurrently: keep enough connections to the API.
	return &stage{healthy: newArrivals(), hanging: &hangingReceiver{},
		c: newAPIClient(cfg.api, cfg.key, 64), b: newAPIClient(cfg.api, cfg.noisyKey, 64)}
}

// tearDown deletes the webhooks, so that deliveries still queued are canceled rather than
// attempted, then stops the receivers. It runs after an interrupt too.
func (s *stage) tearDown(ctx context.Context) {
	deleteWebhooks(ctx, s.b, s.bHooks)
	if s.cHook != 0 {
		deleteWebhooks(ctx, s.c, []int64{s.cHook})
	}
	for _, stop := range s.stops {
		stop()
	}
}

// deleteWebhooks deletes what a run registered, even when the run was interrupted, a few at a
// time (a fan-out registers a thousand). A failed delete is reported and the others go on.
func deleteWebhooks(ctx context.Context, c *apiClient, ids []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = fanOut(len(ids), setUpConcurrency, func(i int) error {
		if err := c.deleteWebhook(ctx, ids[i]); err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: delete webhook %d: %v\n", ids[i], err)
		}
		return nil
	})
}

// setUpConcurrency is how many webhooks a scenario creates or deletes at once.
const setUpConcurrency = 16

// every calls f every d, from another goroutine, until the returned stop is called; stop may be
// called more than once.
func every(d time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// registerWebhooks registers n webhooks at urlFor(i), setUpConcurrency at a time, with a progress
// line under label. It returns their ids, 0 where a registration failed, with the first error:
// whatever it returns, every registration has ended, so the caller can delete what was made.
func registerWebhooks(ctx context.Context, cfg config, client *apiClient, label string, n int, urlFor func(i int) string) ([]int64, error) {
	ids := make([]int64, n)
	var created atomic.Int64
	start := time.Now()
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  [%s] %3.0f s: %d of %d webhooks registered\n", label, time.Since(start).Seconds(), created.Load(), n)
	})
	defer stopProgress()
	err := fanOut(n, setUpConcurrency, func(i int) error {
		id, err := client.createWebhook(ctx, urlFor(i))
		if err != nil {
			return err
		}
		ids[i] = id
		created.Add(1)
		return nil
	})
	return ids, err
}

// registered is ids without the zeros of failed registrations.
func registered(ids []int64) []int64 {
	return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id == 0 })
}
