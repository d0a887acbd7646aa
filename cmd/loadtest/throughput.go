package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// throughputResult is what the throughput scenario measures.
type throughputResult struct {
	published time.Duration   // first publish to the last accepted
	total     time.Duration   // first publish to the last delivery received
	latencies []time.Duration // each publish's, sorted
}

// throughput registers one webhook at a fast receiver, publishes cfg.events events with
// cfg.concurrency clients as fast as the API takes them, and reports the intake rate and the time
// from the first publish to the last delivery received.
func throughput(ctx context.Context, cfg config, cert tls.Certificate) error {
	cfg.events = orDefault(cfg.events, defaultEvents)
	r, err := measureThroughput(ctx, cfg, cert, "throughput")
	if err != nil {
		return err
	}
	fmt.Printf("events: %d, publish concurrency: %d\n", cfg.events, cfg.concurrency)
	fmt.Printf("intake:     %.0f events/s (%s), publish latency p50 %s p99 %s\n",
		float64(cfg.events)/r.published.Seconds(), r.published.Round(time.Millisecond),
		r.latencies[len(r.latencies)/2].Round(time.Microsecond), r.latencies[len(r.latencies)*99/100].Round(time.Microsecond))
	fmt.Printf("deliveries: %.0f deliveries/s (first publish to last delivery: %s)\n", float64(cfg.events)/r.total.Seconds(), r.total.Round(time.Millisecond))
	return nil
}

// defaultEvents is -events' default for the throughput and tiers scenarios.
const defaultEvents = 1000

// measureThroughput is the throughput scenario without its report; label names it in progress
// lines.
func measureThroughput(ctx context.Context, cfg config, cert tls.Certificate, label string) (throughputResult, error) {
	counter := newDeliveryCounter(int64(cfg.events))
	addr, stop, err := serveTLS(cfg.listen, cert, counter)
	if err != nil {
		return throughputResult{}, err
	}
	defer stop()

	client := newAPIClient(cfg.api, cfg.key, cfg.concurrency)
	hookID, err := client.createWebhook(ctx, "https://"+addr+"/hook")
	if err != nil {
		return throughputResult{}, fmt.Errorf("register the receiver: %w", err)
	}
	defer deleteWebhooks(ctx, client, []int64{hookID})

	start := time.Now()
	var accepted atomic.Int64
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  %s: %d of %d events accepted, %d delivered\n", label, accepted.Load(), cfg.events, counter.received.Load())
	})
	latencies, _, err := publishClosedLoop(ctx, client, cfg.events, cfg.concurrency, &accepted)
	stopProgress()
	if err != nil {
		return throughputResult{}, fmt.Errorf("publish: %w", err)
	}
	published := time.Since(start)
	if err := awaitCounter(ctx, counter, cfg, label); err != nil {
		return throughputResult{}, err
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return throughputResult{published: published, total: counter.lastArrival().Sub(start), latencies: latencies}, nil
}

// publishClosedLoop publishes n events with the given number of clients, each publishing its next
// event when the previous one is accepted, and returns each publish's latency and the accepted
// events' ids. It counts the accepted events in accepted.
func publishClosedLoop(ctx context.Context, client *apiClient, n, clients int, accepted *atomic.Int64) ([]time.Duration, []int64, error) {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		ids       []int64
		lastErr   error
	)
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range jobs {
				t0 := time.Now()
				ev, err := client.publish(ctx)
				mu.Lock()
				if err != nil {
					lastErr = err
				} else {
					latencies = append(latencies, time.Since(t0))
					ids = append(ids, ev.ID)
					accepted.Add(1)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	return latencies, ids, lastErr
}

// deliveryCounter is the throughput receiver: it counts campaign.created deliveries and closes
// done when the expected number has arrived.
type deliveryCounter struct {
	expected int64
	received atomic.Int64
	done     chan struct{}
	mu       sync.Mutex
	last     time.Time
}

func newDeliveryCounter(expected int64) *deliveryCounter {
	return &deliveryCounter{expected: expected, done: make(chan struct{})}
}

func (c *deliveryCounter) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // the arrival is what counts, not the body
	if r.Header.Get("X-Service-Event") != "campaign.created" {
		return
	}
	n := c.received.Add(1)
	c.mu.Lock()
	c.last = time.Now()
	c.mu.Unlock()
	if n == c.expected {
		close(c.done)
	}
}

func (c *deliveryCounter) lastArrival() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}
