package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"
)

// openLoopResult is what the openloop scenario measures: the event-to-receipt distribution of
// events published at a fixed rate.
type openLoopResult struct {
	rate     float64
	duration time.Duration
	s        summary
}

// openloop publishes cfg.rate events/s for cfg.duration to one webhook at a healthy receiver, open
// loop (a publish does not wait for the previous one's answer, as real traffic does not), and
// reports the accepted count and the p50, p99 and max event-to-receipt times.
func openloop(ctx context.Context, cfg config, cert tls.Certificate) error {
	r, err := measureOpenLoop(ctx, cfg, cert)
	if err != nil {
		return err
	}
	fmt.Printf("\nopen loop at %g events/s for %s: %d events accepted; event-to-receipt p50 %s, p99 %s, max %s\n",
		r.rate, r.duration, r.s.events, r.s.p50, r.s.p99, r.s.max)
	if r.s.missing > 0 {
		return &incompleteError{missing: r.s.missing, waited: cfg.timeout}
	}
	return nil
}

// measureOpenLoop is the openloop scenario without its report. Deliveries still missing when
// cfg.timeout has passed count with the time waited, as lower bounds (summary.missing).
func measureOpenLoop(ctx context.Context, cfg config, cert tls.Certificate) (openLoopResult, error) {
	healthy := newArrivals()
	addr, stop, err := serveTLS(cfg.listen, cert, healthy)
	if err != nil {
		return openLoopResult{}, fmt.Errorf("healthy receiver: %w", err)
	}
	defer stop()
	// Open-loop publishers run concurrently: keep enough connections to the API.
	client := newAPIClient(cfg.api, cfg.key, 64)
	url := "https://" + addr + "/openloop"
	hook, err := client.createWebhook(ctx, url)
	if err != nil {
		return openLoopResult{}, fmt.Errorf("register the receiver: %w", err)
	}
	defer deleteWebhooks(ctx, client, []int64{hook})

	fmt.Printf("openloop: %g events/s for %s to webhook %d at %s\n", cfg.rate, cfg.duration, hook, url)
	l := &ledger{}
	start := time.Now()
	progress := func() {
		pubs := l.accepted()
		fmt.Printf("  [openloop] %3.0f s: %d of %d received; %s\n", time.Since(start).Seconds(),
			countArrived(pubs, hook, healthy), len(pubs), l)
	}
	if err := publishOpenLoop(ctx, cfg, progress, openStream{client: client, ledger: l}); err != nil {
		return openLoopResult{}, err
	}
	if err := l.err(); err != nil {
		return openLoopResult{}, err
	}
	pubs := l.accepted()
	waitForReceipts(ctx, pubs, hook, healthy, time.Now().Add(cfg.timeout), cfg.progress, func(int) { progress() })
	if err := ctx.Err(); err != nil {
		return openLoopResult{}, err
	}
	return openLoopResult{rate: cfg.rate, duration: cfg.duration,
		s: summarize(receipts(pubs, hook, healthy, time.Now()))}, nil
}
