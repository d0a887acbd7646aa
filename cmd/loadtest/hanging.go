package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// hanging is issue 7's experiment: C's event-to-receipt time on the idle stack, then while B's
// deliveries hang on a receiver that never answers.
func hanging(ctx context.Context, cfg config, cert tls.Certificate) error {
	s, err := setUp(ctx, cfg, cert, orDefault(cfg.noisyHooks, 100))
	if err != nil {
		return err
	}
	defer s.tearDown(ctx)

	fmt.Printf("\nC baseline: %d events, one at a time, on the idle stack\n", cfg.baseline)
	idle, err := s.baseline(ctx, cfg)
	if err != nil {
		return err
	}

	fmt.Printf("\nB publishes %d events\n", cfg.noisyEvents)
	if err := s.publishNoisy(ctx, cfg.noisyEvents); err != nil {
		return err
	}

	fmt.Printf("\nC publishes %d events, one every %s, while B's deliveries hang\n", cfg.probes, cfg.probeEvery)
	_, loaded, err := s.probe(ctx, cfg)
	if err != nil {
		return err
	}

	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "account C\tevents\tp50\tmax")
	for _, row := range []struct {
		name string
		s    summary
	}{{"idle stack", summarize(idle)}, {"B's deliveries hanging", summarize(loaded)}} {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", row.name, row.s.events, row.s.p50, row.s.max)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sum := summarize(loaded); sum.missing > 0 {
		return &incompleteError{missing: sum.missing, waited: cfg.timeout}
	}
	return nil
}

// baseline publishes C's events one at a time, each after the previous one arrived.
func (s *stage) baseline(ctx context.Context, cfg config) ([]obs, error) {
	var out []obs
	for i := range cfg.baseline {
		l := &ledger{}
		l.publish(ctx, s.c)
		if err := l.err(); err != nil {
			return nil, err
		}
		pubs := l.accepted()
		waitForReceipts(ctx, pubs, s.cHook, s.healthy, time.Now().Add(cfg.timeout), cfg.progress, func(int) {
			fmt.Printf("  waiting for event %d\n", pubs[0].eventID)
		})
		o := receipts(pubs, s.cHook, s.healthy, time.Now())[0]
		fmt.Printf("  %d. event %d: %s\n", i+1, pubs[0].eventID, o)
		if o.lowerBound {
			return nil, fmt.Errorf("a delivery on the idle stack did not arrive within %s: is the stack working?", cfg.timeout)
		}
		out = append(out, o)
	}
	return out, nil
}

// publishNoisy publishes B's events at once and waits until the API has accepted them all, so
// that their deliveries are under way when C publishes.
func (s *stage) publishNoisy(ctx context.Context, n int) error {
	l, took := publishAtOnce(ctx, s.b, n)
	fmt.Printf("  %s, accepted in %.3f s; %s\n", l, took.Seconds(), s.hanging)
	return l.err()
}

// publishAtOnce publishes n events as c, all concurrently, and returns once every publish has
// returned, with how long that took.
func publishAtOnce(ctx context.Context, c *apiClient, n int) (*ledger, time.Duration) {
	l := &ledger{}
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { l.publish(ctx, c) })
	}
	wg.Wait()
	return l, time.Since(start)
}

// probe publishes C's events on a ticker, open loop, then waits for their deliveries and prints
// each event's event-to-receipt time, in publishing order. It returns the events with their times.
func (s *stage) probe(ctx context.Context, cfg config) ([]publication, []obs, error) {
	l := &ledger{}
	var wg sync.WaitGroup
	tick := time.NewTicker(cfg.probeEvery)
	defer tick.Stop()
	for i := range cfg.probes {
		if i > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return nil, nil, ctx.Err()
			case <-tick.C:
			}
		}
		wg.Go(func() { l.publish(ctx, s.c) })
	}
	wg.Wait()
	if err := l.err(); err != nil {
		return nil, nil, err
	}

	pubs := l.accepted()
	slices.SortFunc(pubs, func(a, b publication) int { return a.start.Compare(b.start) })
	waitForReceipts(ctx, pubs, s.cHook, s.healthy, time.Now().Add(cfg.timeout), cfg.progress, func(n int) {
		fmt.Printf("  %d of %d of C's deliveries arrived; %s\n", n, len(pubs), s.hanging)
	})
	out := receipts(pubs, s.cHook, s.healthy, time.Now())
	for i, o := range out {
		fmt.Printf("  +%4.1f s  event %d: %s\n", pubs[i].start.Sub(pubs[0].start).Seconds(), pubs[i].eventID, o)
	}
	return pubs, out, nil
}

// orDefault returns v, or def when v is zero: some flags' defaults depend on the scenario.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
