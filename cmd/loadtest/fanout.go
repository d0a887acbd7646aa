package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"
)

// fanOutResult is what the fanout scenario measures.
type fanOutResult struct {
	hooks    int
	accepted time.Duration // publish sent to its 202
	last     obs           // publish sent to the last receipt; a lower bound when some are missing
	missing  int
	starts   startDelta
}

// fanout registers cfg.hooks webhooks at a healthy receiver, publishes one event, and reports how
// long the API took to accept it and how long until the last of its deliveries arrived, with who
// started the delivery workflows: the request, or the sweeper it left them to.
func fanout(ctx context.Context, cfg config, cert tls.Certificate) error {
	r, err := measureFanOut(ctx, cfg, cert)
	if err != nil {
		return err
	}
	fmt.Printf("\nfan-out to %d webhooks: 202 after %.3f s, last receipt after %s; workflows started by the request / the sweeper: %s\n",
		r.hooks, r.accepted.Seconds(), r.last, r.starts)
	if r.missing > 0 {
		return &incompleteError{missing: r.missing, waited: cfg.timeout}
	}
	return nil
}

// measureFanOut is the fanout scenario without its report. It deletes the webhooks it registered
// whatever happens.
func measureFanOut(ctx context.Context, cfg config, cert tls.Certificate) (fanOutResult, error) {
	n := cfg.hooks
	healthy := newArrivals()
	addr, stop, err := serveTLS(cfg.listen, cert, healthy)
	if err != nil {
		return fanOutResult{}, fmt.Errorf("healthy receiver: %w", err)
	}
	defer stop()
	client := newAPIClient(cfg.api, cfg.key, setUpConcurrency)

	fmt.Printf("fanout: registering %d webhooks at https://%s/fanout/...\n", n, addr)
	ids, err := registerWebhooks(ctx, cfg, client, "fanout", n, func(i int) string { return fmt.Sprintf("https://%s/fanout/%d", addr, i) })
	defer func() {
		made := registered(ids)
		fmt.Printf("fanout: deleting %d webhooks\n", len(made))
		deleteWebhooks(ctx, client, made)
	}()
	if err != nil {
		return fanOutResult{}, fmt.Errorf("register the webhooks: %w", err)
	}

	before := scrapeStarts(ctx, cfg.api)
	fmt.Printf("fanout: publishing one event to %d webhooks\n", n)
	start := time.Now()
	res, err := client.publish(ctx)
	if err != nil {
		return fanOutResult{}, fmt.Errorf("publish: %w", err)
	}
	r := fanOutResult{hooks: n, accepted: time.Since(start)}
	if res.Matched != n {
		return fanOutResult{}, fmt.Errorf("event %d matched %d webhooks, want %d: does the account have others?", res.ID, res.Matched, n)
	}
	arrived := func() (int, time.Time) {
		count, last := 0, time.Time{}
		for _, id := range ids {
			if at, ok := healthy.arrived(messageID(res.ID, id)); ok {
				count++
				if at.After(last) {
					last = at
				}
			}
		}
		return count, last
	}
	pollUntil(ctx, time.Now().Add(cfg.timeout), cfg.progress,
		func() bool { count, _ := arrived(); return count == n },
		func() {
			count, _ := arrived()
			fmt.Printf("  [fanout] %3.0f s: %d of %d deliveries received\n", time.Since(start).Seconds(), count, n)
		})
	if err := ctx.Err(); err != nil {
		return fanOutResult{}, err
	}
	count, last := arrived()
	r.missing = n - count
	if r.missing > 0 {
		r.last = obs{d: time.Since(start), lowerBound: true}
	} else {
		r.last = obs{d: last.Sub(start)}
	}
	r.starts = awaitStarts(ctx, cfg, before, count)
	return r, nil
}
