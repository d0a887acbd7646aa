package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// publication is one accepted event.
type publication struct {
	eventID int64
	start   time.Time // when POST /events was called: event-to-receipt counts the intake too
}

// ledger collects the events one account published in one phase. Publishers run concurrently
// (open loop), so it is safe for concurrent use.
type ledger struct {
	mu      sync.Mutex
	pubs    []publication
	matched int // deliveries the accepted events started
	failed  int
	lastErr error
}

// publish publishes one event as c and records the outcome.
func (l *ledger) publish(ctx context.Context, c *apiClient) {
	start := time.Now()
	res, err := c.publish(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed++
		l.lastErr = err
		return
	}
	l.pubs = append(l.pubs, publication{eventID: res.ID, start: start})
	l.matched += res.Matched
}

// accepted returns a copy of the accepted events.
func (l *ledger) accepted() []publication {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]publication(nil), l.pubs...)
}

// deliveries returns how many deliveries the accepted events started.
func (l *ledger) deliveries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.matched
}

// String counts the ledger for progress lines and reports.
func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d events published (%d deliveries)", len(l.pubs), l.matched)
	if l.failed > 0 {
		s += fmt.Sprintf(", %d publishes failed (last: %v)", l.failed, l.lastErr)
	}
	return s
}

// err reports failed publishes: a measurement that lost events is not one.
func (l *ledger) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed > 0 {
		return fmt.Errorf("%d publishes failed, the last with: %w", l.failed, l.lastErr)
	}
	return nil
}

// receipts matches accepted events to their deliveries to the webhook hookID at the healthy
// receiver. An event whose delivery has not arrived by now counts with the time it has waited,
// marked as a lower bound.
func receipts(pubs []publication, hookID int64, a *arrivals, now time.Time) []obs {
	out := make([]obs, 0, len(pubs))
	for _, p := range pubs {
		if at, ok := a.arrived(messageID(p.eventID, hookID)); ok {
			out = append(out, obs{d: at.Sub(p.start)})
		} else {
			out = append(out, obs{d: now.Sub(p.start), lowerBound: true})
		}
	}
	return out
}

// waitForReceipts waits until every event in pubs has reached the healthy receiver, the deadline
// passes or ctx ends, printing progress every progressEvery. It reports whether all arrived.
func waitForReceipts(ctx context.Context, pubs []publication, hookID int64, a *arrivals, deadline time.Time,
	progressEvery time.Duration, progress func(arrived int)) bool {
	return pollUntil(ctx, deadline, progressEvery,
		func() bool { return countArrived(pubs, hookID, a) == len(pubs) },
		func() { progress(countArrived(pubs, hookID, a)) })
}

// pollUntil polls done until it holds, the deadline passes or ctx ends, calling progress every
// progressEvery meanwhile. It reports whether done held.
func pollUntil(ctx context.Context, deadline time.Time, progressEvery time.Duration, done func() bool, progress func()) bool {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	lastProgress := time.Now()
	for !done() {
		if time.Since(lastProgress) >= progressEvery {
			progress()
			lastProgress = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case now := <-poll.C:
			if now.After(deadline) {
				return done()
			}
		}
	}
	return true
}

func countArrived(pubs []publication, hookID int64, a *arrivals) int {
	n := 0
	for _, p := range pubs {
		if _, ok := a.arrived(messageID(p.eventID, hookID)); ok {
			n++
		}
	}
	return n
}
