package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"
)

// noise is what account B does during a phase of the isolation scenario.
type noise int

const (
	quiet        noise = iota // B publishes nothing
	fastNoise                 // B's receiver answers at once: what B's traffic costs on its own
	hangingNoise              // B's receiver never answers
)

// phaseResult is C's event-to-receipt distribution in one phase, and B's deliveries that had not
// arrived when the phase ended (the control phase waits for them, so that the next starts clean).
type phaseResult struct {
	name       string
	c          summary
	bUndrained int64
}

// isolation measures how much a hanging receiver slows another account's healthy one: C publishes
// at cfg.rate alone, then while B publishes at the same rate to a receiver that answers at once
// (the control, unless -control=false), then to one that never answers. Publishing is open loop,
// as real traffic is: a slow stack does not slow the publishers.
func isolation(ctx context.Context, cfg config, cert tls.Certificate) error {
	s, err := setUp(ctx, cfg, cert, orDefault(cfg.noisyHooks, 20))
	if err != nil {
		return err
	}
	defer s.tearDown(ctx)

	type phaseSpec struct {
		name  string
		noise noise
	}
	phases := []phaseSpec{{"alone", quiet}}
	if cfg.control {
		phases = append(phases, phaseSpec{"with B fast", fastNoise})
	}
	phases = append(phases, phaseSpec{"with B hanging", hangingNoise})

	var results []phaseResult
	for _, p := range phases {
		r, err := s.phase(ctx, cfg, p.name, p.noise)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	return report(cfg, len(s.bHooks), results)
}

// report prints the phases side by side and the ratios of their p99 to the quiet phase's.
func report(cfg config, bHooks int, results []phaseResult) error {
	fmt.Printf("\naccount C's event-to-receipt; C publishes %g events/s for %s per phase, B as many to %d webhooks:\n",
		cfg.rate, cfg.duration, bHooks)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tevents\tp50\tp99\tmax\tp99 / p99 alone")
	missing := 0
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.name, r.c.events, r.c.p50, r.c.p99, r.c.max, ratio(r.c.p99, results[0].c.p99))
		missing += r.c.missing
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.bUndrained > 0 {
			fmt.Printf("%d of B's deliveries in phase %q had not arrived when the next phase began\n", r.bUndrained, r.name)
		}
	}
	if missing > 0 {
		return &incompleteError{missing: missing, waited: cfg.timeout}
	}
	return nil
}

// phase publishes C's events (and as many of B's, unless quiet) on a ticker for cfg.duration, then
// waits for C's deliveries and summarizes their event-to-receipt times.
func (s *stage) phase(ctx context.Context, cfg config, name string, n noise) (phaseResult, error) {
	s.hanging.fast.Store(n == fastNoise)
	fmt.Printf("\nphase %q: C publishes %g events/s for %s", name, cfg.rate, cfg.duration)
	switch n {
	case fastNoise:
		fmt.Printf("; B publishes as many to %d webhooks that answer at once", len(s.bHooks))
	case hangingNoise:
		fmt.Printf("; B publishes as many to %d webhooks that never answer", len(s.bHooks))
	}
	fmt.Println()
	c, b := &ledger{}, &ledger{}
	start := time.Now()
	progress := func() {
		pubs := c.accepted()
		line := fmt.Sprintf("  [%s] %3.0f s: C %d of %d received", name, time.Since(start).Seconds(),
			countArrived(pubs, s.cHook, s.healthy), len(pubs))
		if n != quiet {
			line += fmt.Sprintf("; B %s; %s", b, s.hanging)
		}
		fmt.Println(line)
	}
	streams := []openStream{{client: s.c, ledger: c}}
	if n != quiet {
		streams = append(streams, openStream{client: s.b, ledger: b})
	}
	if err := publishOpenLoop(ctx, cfg, progress, streams...); err != nil {
		return phaseResult{}, err
	}
	if err := c.err(); err != nil {
		return phaseResult{}, fmt.Errorf("account C: %w", err)
	}
	if err := b.err(); err != nil {
		return phaseResult{}, fmt.Errorf("account B: %w", err)
	}

	pubs := c.accepted()
	waitForReceipts(ctx, pubs, s.cHook, s.healthy, time.Now().Add(cfg.timeout), cfg.progress, func(int) { progress() })
	r := phaseResult{name: name, c: summarize(receipts(pubs, s.cHook, s.healthy, time.Now()))}
	if n == fastNoise {
		r.bUndrained = s.drainFast(ctx, cfg, b.deliveries(), progress)
	}
	progress()
	return r, nil
}

// drainFast waits until B's fast receiver has answered all of B's deliveries, so that the next
// phase starts on an idle stack, and returns how many were still missing.
func (s *stage) drainFast(ctx context.Context, cfg config, deliveries int, progress func()) int64 {
	want := int64(deliveries)
	pollUntil(ctx, time.Now().Add(cfg.timeout), cfg.progress,
		func() bool { return s.hanging.answered.Load() >= want }, progress)
	return max(0, want-s.hanging.answered.Load())
}

// openStream is one account's open-loop publishing: an event as client per tick, recorded in
// ledger.
type openStream struct {
	client *apiClient
	ledger *ledger
}

// publishOpenLoop publishes cfg.rate x cfg.duration ticks' worth of events, one per tick for each
// stream, each in its own goroutine, so that a slow API does not lower the offered load. It calls
// progress every cfg.progress and returns when every publish has returned.
func publishOpenLoop(ctx context.Context, cfg config, progress func(), streams ...openStream) error {
	total := int(cfg.rate * cfg.duration.Seconds())
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	progressTick := time.NewTicker(cfg.progress)
	defer progressTick.Stop()

	var wg sync.WaitGroup
	for sent := 0; sent < total; {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-progressTick.C:
			progress()
		case <-tick.C:
			for _, st := range streams {
				wg.Go(func() { st.ledger.publish(ctx, st.client) })
			}
			sent++
		}
	}
	// Publishes still in flight: keep reporting while they finish.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return nil
		case <-progressTick.C:
			progress()
		}
	}
}
