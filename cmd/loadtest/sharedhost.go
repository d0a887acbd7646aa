package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// sharedHost is issue 17's experiment: accounts B and C on one receiver host and port. C's one
// webhook answers at once; B's never answer. C publishes on the idle stack, then B publishes and,
// once any breaker on the host has had time to open (cfg.pause), C publishes again. It reports
// C's event-to-receipt, failed attempts and webhook status per phase beside B's hang time: guards
// keyed by host alone make C pay for B's receiver.
func sharedHost(ctx context.Context, cfg config, cert tls.Certificate) error {
	s, held, err := setUpSharedHost(ctx, cfg, cert, orDefault(cfg.noisyHooks, 100))
	if err != nil {
		return err
	}
	defer s.tearDown(ctx)

	type phase struct {
		name string
		pubs []publication
		c    summary
	}
	var phases []phase
	probe := func(name string) error {
		fmt.Printf("\nphase %q: C publishes %d events, one every %s\n", name, cfg.probes, cfg.probeEvery)
		pubs, o, err := s.probe(ctx, cfg)
		if err != nil {
			return err
		}
		phases = append(phases, phase{name: name, pubs: pubs, c: summarize(o)})
		return ctx.Err()
	}

	if err := probe("B idle"); err != nil {
		return err
	}
	fmt.Printf("\nB publishes %d events to its %d webhooks\n", cfg.noisyEvents, len(s.bHooks))
	if err := s.publishNoisy(ctx, cfg.noisyEvents); err != nil {
		return err
	}
	fmt.Printf("  waiting %s for any breaker on the host to open\n", cfg.pause)
	pollUntil(ctx, time.Now().Add(cfg.pause), cfg.progress, func() bool { return false },
		func() { fmt.Printf("  %s; %s\n", s.hanging, held) })
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := probe("B hanging"); err != nil {
		return err
	}

	ds, err := s.c.deliveries(ctx, s.cHook)
	if err != nil {
		return fmt.Errorf("account C's deliveries: %w", err)
	}
	status, err := s.c.webhookStatus(ctx, s.cHook)
	if err != nil {
		return fmt.Errorf("account C's webhook: %w", err)
	}

	fmt.Printf("\naccount C's event-to-receipt, %d events per phase one every %s, on the host and port of B's %d hanging webhooks (not arrived: within %s of the phase's last publish):\n",
		cfg.probes, cfg.probeEvery, len(s.bHooks), cfg.timeout)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tevents\tp50\tp99\tmax\tnot arrived\tfailed attempts")
	missing := 0
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", p.name, p.c.events, p.c.p50, p.c.p99, p.c.max, p.c.missing, failedAttempts(ds, p.pubs))
		missing += p.c.missing
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "healthy"
	if status != "processing" {
		verdict = "NOT healthy: want processing"
	}
	fmt.Printf("C's webhook at the end: %s (%s)\n", status, verdict)
	fmt.Printf("B's hang: %d requests reached the receiver, %s\n", s.hanging.total.Load(), held)
	if missing > 0 {
		return &incompleteError{missing: missing, waited: cfg.timeout}
	}
	return nil
}

// setUpSharedHost starts one receiver that serves C's webhook at /ok and B's at /hang/<i>, so that
// webhookd sees a single host and port for both accounts, and registers the webhooks. The
// holdTimer it returns times B's requests.
func setUpSharedHost(ctx context.Context, cfg config, cert tls.Certificate, noisyHooks int) (*stage, *holdTimer, error) {
	s := newStage(cfg)
	held := &holdTimer{next: s.hanging}
	mux := http.NewServeMux()
	mux.Handle("/ok", s.healthy)
	mux.Handle("/hang/", held)
	addr, stop, err := serveTLS(cfg.listen, cert, mux)
	if err != nil {
		return nil, nil, fmt.Errorf("receiver: %w", err)
	}
	s.stops = append(s.stops, stop)

	base := "https://" + addr
	if s.cHook, err = s.c.createWebhook(ctx, base+"/ok"); err != nil {
		s.tearDown(ctx)
		return nil, nil, fmt.Errorf("account C (-key): %w", err)
	}
	ids, err := registerWebhooks(ctx, cfg, s.b, "B", noisyHooks, func(i int) string { return fmt.Sprintf("%s/hang/%d", base, i) })
	s.bHooks = registered(ids)
	if err != nil {
		s.tearDown(ctx)
		return nil, nil, fmt.Errorf("account B (-noisy-key): %w", err)
	}
	fmt.Printf("account C: webhook %d at %s/ok (answers 204 at once)\n", s.cHook, base)
	fmt.Printf("account B: %d webhooks at %s/hang/... (reads the request, never answers)\n", noisyHooks, base)
	return s, held, nil
}

// holdTimer times how long its handler held each request. Around the hanging receiver that is how
// long webhookd waited for an answer before it hung up: its delivery timeout, seen from the
// receiver.
type holdTimer struct {
	next http.Handler
	mu   sync.Mutex
	held []obs
}

func (t *holdTimer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.next.ServeHTTP(w, r)
	t.mu.Lock()
	t.held = append(t.held, obs{d: time.Since(start)})
	t.mu.Unlock()
}

// String summarizes the holds that have ended, for progress lines and the report.
func (t *holdTimer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) == 0 {
		return "none held to its end yet"
	}
	s := summarize(t.held)
	return fmt.Sprintf("%d held until webhookd hung up: min %s, p50 %s, max %s",
		s.events, slices.MinFunc(t.held, func(a, b obs) int { return cmp.Compare(a.d, b.d) }), s.p50, s.max)
}

// failedAttempts counts the failed attempts of the deliveries of pubs' events, with their error
// classes: "0", or "12 (circuit_open 10, timeout 2)".
func failedAttempts(ds []delivery, pubs []publication) string {
	events := make(map[int64]bool, len(pubs))
	for _, p := range pubs {
		events[p.eventID] = true
	}
	n, byClass := 0, map[string]int{}
	for _, d := range ds {
		if !events[d.EventID] {
			continue
		}
		for _, a := range d.AttemptLog {
			if !a.failed() {
				continue
			}
			n++
			switch {
			case a.ErrorClass != nil:
				byClass[*a.ErrorClass]++
			case a.StatusCode != nil:
				byClass[fmt.Sprintf("HTTP %d", *a.StatusCode)]++
			default:
				byClass["unclassified"]++
			}
		}
	}
	if n == 0 {
		return "0"
	}
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		parts = append(parts, fmt.Sprintf("%s %d", class, byClass[class]))
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}
