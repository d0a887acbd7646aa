package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"
)

// defaultBurstEvents is -events' default for the burst scenario.
const defaultBurstEvents = 2000

// burstResult is what the burst scenario measures.
type burstResult struct {
	events int
	t      throughputResult
	starts startDelta
}

func (r burstResult) intake() float64     { return float64(r.events) / r.t.published.Seconds() }
func (r burstResult) deliveries() float64 { return float64(r.events) / r.t.total.Seconds() }

// burst publishes cfg.events events to one webhook as fast as cfg.concurrency clients can (the
// throughput scenario), waits until all are delivered, and reports the intake and delivery rates
// with who started the delivery workflows: the requests, or the sweeper they left them to.
func burst(ctx context.Context, cfg config, cert tls.Certificate) error {
	r, err := measureBurst(ctx, cfg, cert)
	if err != nil {
		return err
	}
	fmt.Printf("\nburst of %d events: intake %.0f events/s; last delivery after %s, %.0f deliveries/s; workflows started by the requests / the sweeper: %s\n",
		r.events, r.intake(), r.t.total.Round(time.Millisecond), r.deliveries(), r.starts)
	return nil
}

// measureBurst is the burst scenario without its report.
func measureBurst(ctx context.Context, cfg config, cert tls.Certificate) (burstResult, error) {
	cfg.events = orDefault(cfg.events, defaultBurstEvents)
	fmt.Printf("burst: %d events, %d concurrent publishers, one webhook\n", cfg.events, cfg.concurrency)
	before := scrapeStarts(ctx, cfg.api)
	t, err := measureThroughput(ctx, cfg, cert, "burst")
	if err != nil {
		return burstResult{}, err
	}
	return burstResult{events: cfg.events, t: t, starts: awaitStarts(ctx, cfg, before, cfg.events)}, nil
}
