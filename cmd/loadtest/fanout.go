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
	filtered int           // of hooks, those whose payload filter refuses the event
	accepted time.Duration // publish sent to its 202
	last     obs           // publish sent to the last receipt; a lower bound when some are missing
	missing  int
	starts   startDelta
}

// fanout registers cfg.hooks webhooks at a healthy receiver, publishes one event, and reports how
// long the API took to accept it and how long until the last of its deliveries arrived, with who
// started the delivery workflows: the request, or the sweeper it left them to.
func fanout(ctx context.Context, cfg config, cert tls.Certificate) error {
	r, err := measureFanOut(ctx, cfg, cert, 0)
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

// fanoutFilter is issue 29's comparison, in one run: the fanout scenario without filters, then
// with half of the -hooks webhooks carrying a payload filter that refuses the event. It reports
// both 202s and the workflows started (half as many with the filters).
func fanoutFilter(ctx context.Context, cfg config, cert tls.Certificate) error {
	plain, err := measureFanOut(ctx, cfg, cert, 0)
	if err != nil {
		return err
	}
	half, err := measureFanOut(ctx, cfg, cert, cfg.hooks/2)
	if err != nil {
		return err
	}
	fmt.Printf("\n| fan-out to %d webhooks | 202 after | webhooks reached | workflows started | last receipt |\n|---|---|---|---|---|\n", cfg.hooks)
	for _, r := range []fanOutResult{plain, half} {
		fmt.Printf("| %d refused by their filter | %.3f s | %d | %d | %s |\n", r.filtered, r.accepted.Seconds(), r.hooks-r.filtered, r.starts.total(), r.last)
	}
	if plain.missing > 0 || half.missing > 0 {
		return &incompleteError{missing: plain.missing + half.missing, waited: cfg.timeout}
	}
	return nil
}

// refusingFilter is a payload filter that the fan-out's event (client.publish: a campaign named
// "Load") does not pass.
var refusingFilter = map[string]any{"data": map[string]any{"name": "not the load campaign"}}

// measureFanOut is the fanout scenario without its report, the first filtered of the webhooks
// carrying refusingFilter. It deletes the webhooks it registered whatever happens.
func measureFanOut(ctx context.Context, cfg config, cert tls.Certificate, filtered int) (fanOutResult, error) {
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
	if err := fanOut(filtered, setUpConcurrency, func(i int) error { return client.setFilter(ctx, ids[i], refusingFilter) }); err != nil {
		return fanOutResult{}, fmt.Errorf("set the filters: %w", err)
	}
	reached := ids[filtered:]

	before := scrapeStarts(ctx, cfg.api)
	fmt.Printf("fanout: publishing one event to %d webhooks\n", n)
	start := time.Now()
	res, err := client.publish(ctx)
	if err != nil {
		return fanOutResult{}, fmt.Errorf("publish: %w", err)
	}
	r := fanOutResult{hooks: n, filtered: filtered, accepted: time.Since(start)}
	if res.Matched != len(reached) {
		return fanOutResult{}, fmt.Errorf("event %d matched %d webhooks, want %d: does the account have others?", res.ID, res.Matched, len(reached))
	}
	arrived := func() (int, time.Time) {
		count, last := 0, time.Time{}
		for _, id := range reached {
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
		func() bool { count, _ := arrived(); return count == len(reached) },
		func() {
			count, _ := arrived()
			fmt.Printf("  [fanout] %3.0f s: %d of %d deliveries received\n", time.Since(start).Seconds(), count, len(reached))
		})
	if err := ctx.Err(); err != nil {
		return fanOutResult{}, err
	}
	count, last := arrived()
	r.missing = len(reached) - count
	if r.missing > 0 {
		r.last = obs{d: time.Since(start), lowerBound: true}
	} else {
		r.last = obs{d: last.Sub(start)}
	}
	r.starts = awaitStarts(ctx, cfg, before, count)
	return r, nil
}
