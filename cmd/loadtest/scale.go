package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The scale scenarios (issue 10's scale figures): list, the webhooks list of an account with many
// webhooks; pending, webhookd's memory and the list's latency while many deliveries wait on a long
// retry timer.

// listWebhooks calls GET /webhooks with query (e.g. "limit=50&after=123") and returns the ids of
// the page.
func (c *apiClient) listWebhooks(ctx context.Context, query string) ([]int64, error) {
	var page []struct {
		ID int64 `json:"id"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/svc/v2/webhooks?"+query, nil, &page); err != nil {
		return nil, err
	}
	ids := make([]int64, len(page))
	for i, w := range page {
		ids[i] = w.ID
	}
	return ids, nil
}

// listProbe is one kind of list call: a query and the page length it must return.
type listProbe struct {
	name  string
	query string
	want  int // ids the page must hold; -1: any
}

// timeLists calls each probe n times, round robin, one call at a time, and returns each kind's
// latencies. A call that fails or returns a page of the wrong length is an error: its latency
// would measure something else.
func timeLists(ctx context.Context, c *apiClient, probes []listProbe, n int) (map[string][]obs, error) {
	lat := make(map[string][]obs, len(probes))
	for range n {
		for _, p := range probes {
			start := time.Now()
			ids, err := c.listWebhooks(ctx, p.query)
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("list (%s): %w", p.name, err)
			}
			if p.want >= 0 && len(ids) != p.want {
				return nil, fmt.Errorf("list (%s, ?%s): %d webhooks, want %d", p.name, p.query, len(ids), p.want)
			}
			lat[p.name] = append(lat[p.name], obs{d: d})
		}
	}
	return lat, nil
}

// ms formats a latency in milliseconds.
func ms(o obs) string { return fmt.Sprintf("%.2f ms", float64(o.d)/float64(time.Millisecond)) }

func (s summary) latencies() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s (%d calls)", ms(s.p50), ms(s.p99), ms(s.max), s.events)
}

// scaleList registers cfg.hooks webhooks on the key's account, then times cfg.listCalls calls of
// each kind of list page: the first page, one in the middle and the last full one (keyset
// pagination, ?after=<id>). It deletes the webhooks at the end unless cfg.keep.
func scaleList(ctx context.Context, cfg config) error {
	n, limit := cfg.hooks, cfg.listLimit
	if n < 2*limit+1 {
		return fmt.Errorf("-hooks %d: the list scenario needs at least 2×-list-limit+1 (%d) webhooks", n, 2*limit+1)
	}
	client := newAPIClient(cfg.api, cfg.key, setUpConcurrency)
	if existing, err := client.listWebhooks(ctx, "limit=1"); err != nil {
		return err
	} else if len(existing) > 0 {
		return errors.New("list: the account already has webhooks; use a fresh account, the figures are for exactly -hooks")
	}
	fmt.Printf("list: registering %d webhooks (%d at a time)\n", n, setUpConcurrency)
	start := time.Now()
	ids, err := registerWebhooks(ctx, cfg, client, "list", n, func(i int) string { return fmt.Sprintf("https://%s/h%d", cfg.healthyHost, i) })
	if !cfg.keep {
		defer func() {
			made := registered(ids)
			fmt.Printf("list: deleting %d webhooks\n", len(made))
			start := time.Now()
			deleteWebhooksPatiently(ctx, client, made)
			fmt.Printf("list: deleted in %s\n", time.Since(start).Round(time.Millisecond))
		}()
	}
	if err != nil {
		return fmt.Errorf("register the webhooks: %w", err)
	}
	fmt.Printf("list: %d webhooks registered in %s (%.0f/s)\n", n, time.Since(start).Round(time.Millisecond),
		float64(n)/time.Since(start).Seconds())

	sorted := slices.Sorted(slices.Values(ids))
	probes := []listProbe{
		{name: "first page", query: fmt.Sprintf("limit=%d", limit), want: limit},
		{name: fmt.Sprintf("middle page (after the %dth)", n/2), query: fmt.Sprintf("limit=%d&after=%d", limit, sorted[n/2-1]), want: limit},
		{name: fmt.Sprintf("last full page (after the %dth)", n-limit), query: fmt.Sprintf("limit=%d&after=%d", limit, sorted[n-limit-1]), want: limit},
	}
	// A few calls first, so that connection setup and cold caches are not in the figures.
	if _, err := timeLists(ctx, client, probes, 5); err != nil {
		return err
	}
	fmt.Printf("list: timing %d calls of each kind, one at a time, ?limit=%d\n", cfg.listCalls, limit)
	res, err := timeLists(ctx, client, probes, cfg.listCalls)
	if err != nil {
		return err
	}
	fmt.Printf("\nlist of %d webhooks on one account, ?limit=%d, %d sequential calls per kind:\n", n, limit, cfg.listCalls)
	for _, p := range probes {
		fmt.Printf("  %-34s %s\n", p.name+":", summarize(res[p.name]).latencies())
	}
	return nil
}

// deleteWebhooksPatiently is deleteWebhooks without its minute's limit: deleting ten thousand
// webhooks may take longer.
func deleteWebhooksPatiently(ctx context.Context, c *apiClient, ids []int64) {
	ctx = context.WithoutCancel(ctx)
	_ = fanOut(len(ids), setUpConcurrency, func(i int) error {
		if err := c.deleteWebhook(ctx, ids[i]); err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: delete webhook %d: %v\n", ids[i], err)
		}
		return nil
	})
}

// failingReceiver answers every delivery 500 and counts the distinct deliveries (Webhook-Id) it
// failed, and the requests.
type failingReceiver struct {
	mu       sync.Mutex
	seen     map[string]struct{}
	requests atomic.Int64
}

func (f *failingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.requests.Add(1)
	if id := r.Header.Get("Webhook-Id"); id != "" {
		f.mu.Lock()
		f.seen[id] = struct{}{}
		f.mu.Unlock()
	}
	http.Error(w, "failing on purpose (loadtest -scenario pending)", http.StatusInternalServerError)
}

func (f *failingReceiver) failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

// parseVmRSS returns the VmRSS line of a /proc/<pid>/status in bytes.
func parseVmRSS(status io.Reader) (int64, error) {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line (a kernel thread, or a process that has exited?)")
}

func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	return parseVmRSS(f)
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }

// checkpoints returns the counts at which the pending scenario reports RSS: 0, a quarter, half,
// three quarters and all of n.
func checkpoints(n int) []int {
	return []int{0, n / 4, n / 2, 3 * n / 4, n}
}

// rssSample is the process's RSS when the receiver had failed a number of deliveries.
type rssSample struct {
	at      time.Duration
	pending int
	rss     int64
}

// scalePending registers one webhook at a receiver that answers 500, publishes cfg.events events
// to it with cfg.concurrency closed-loop publishers, and, while every delivery fails its first
// attempt and waits on its retry timer (start the stack with a long WEBHOOKD_RETRY_SCHEDULE),
// samples webhookd's RSS (/proc/<cfg.pid>/status) and times bursts of list calls. It reports RSS at
// each quarter of the events failed, at the end and after cfg.idle, and the list latencies before,
// during and after the load.
func scalePending(ctx context.Context, cfg config, cert tls.Certificate) error {
	n := orDefault(cfg.events, 100000)
	if cfg.pid <= 0 {
		return errors.New("-scenario pending needs -pid, webhookd's process id (for its RSS)")
	}
	if _, err := readRSS(cfg.pid); err != nil {
		return fmt.Errorf("-pid %d: %w", cfg.pid, err)
	}
	recv := &failingReceiver{seen: make(map[string]struct{})}
	addr, stop, err := serveTLS(cfg.listen, cert, recv)
	if err != nil {
		return fmt.Errorf("failing receiver: %w", err)
	}
	defer stop()
	client := newAPIClient(cfg.api, cfg.key, cfg.concurrency)
	lister := newAPIClient(cfg.api, cfg.key, 1)
	hook, err := client.createWebhook(ctx, "https://"+addr+"/pending")
	if err != nil {
		return fmt.Errorf("register the receiver: %w", err)
	}
	if !cfg.keep {
		defer deleteWebhooks(ctx, client, []int64{hook})
	}
	probes := []listProbe{
		{name: "webhooks", query: fmt.Sprintf("limit=%d", cfg.listLimit), want: -1},
	}
	burst := func() ([]obs, error) {
		res, err := timeLists(ctx, lister, probes, cfg.listCalls)
		if err != nil {
			return nil, err
		}
		return res["webhooks"], nil
	}

	start := time.Now()
	var (
		mu       sync.Mutex
		samples  []rssSample
		peak     rssSample
		during   []obs
		burstN   int
		burstP99 []obs
	)
	sample := func() rssSample {
		rss, err := readRSS(cfg.pid)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: RSS of %d: %v\n", cfg.pid, err)
		}
		s := rssSample{at: time.Since(start), pending: recv.failed(), rss: rss}
		mu.Lock()
		samples = append(samples, s)
		if s.rss > peak.rss {
			peak = s
		}
		mu.Unlock()
		return s
	}

	if _, err := burst(); err != nil { // warm-up
		return err
	}
	before, err := burst()
	if err != nil {
		return err
	}
	s0 := sample()
	fmt.Printf("pending: %d events to webhook %d at https://%s/pending (answers 500), %d closed-loop publishers; webhookd pid %d RSS %s\n",
		n, hook, addr, cfg.concurrency, cfg.pid, mb(s0.rss))
	fmt.Printf("pending: list before the load: %s\n", summarize(before).latencies())

	var accepted atomic.Int64
	stopSampling := every(cfg.sample, func() { sample() })
	defer stopSampling()
	var burstErr error
	stopBursts := every(cfg.listEvery, func() {
		s, err := burst()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			burstErr = err
			return
		}
		burstN++
		// The "during" figures are over every call made under load; each burst's p99 is kept too.
		during = append(during, s...)
		burstP99 = append(burstP99, summarize(s).p99)
	})
	defer stopBursts()
	stopProgress := every(cfg.progress, func() {
		mu.Lock()
		last := samples[len(samples)-1]
		var p99 string
		if len(burstP99) > 0 {
			p99 = ", last list burst p99 " + ms(burstP99[len(burstP99)-1])
		}
		mu.Unlock()
		el := time.Since(start).Seconds()
		fmt.Printf("  [pending] %4.0f s: %d accepted (%.0f/s), %d failed first attempts (%d requests), RSS %s%s\n",
			el, accepted.Load(), float64(accepted.Load())/el, recv.failed(), recv.requests.Load(), mb(last.rss), p99)
	})
	defer stopProgress()

	if err := publishUntil(ctx, client, n, cfg.concurrency, cfg.publishFor, &accepted); err != nil {
		return fmt.Errorf("publish (%d accepted): %w", accepted.Load(), err)
	}
	published := time.Since(start)
	if int(accepted.Load()) < n {
		fmt.Printf("pending: -publish-for %s passed: publishing stopped at %d of %d events\n", cfg.publishFor, accepted.Load(), n)
		n = int(accepted.Load())
	}
	fmt.Printf("pending: %d events accepted in %s (%.0f/s)\n", n, published.Round(time.Millisecond), float64(n)/published.Seconds())
	// A publish that failed on the client's side may still have been accepted: ≥ n.
	all := pollUntil(ctx, time.Now().Add(cfg.timeout), time.Hour, func() bool { return recv.failed() >= n }, func() {})
	if err := ctx.Err(); err != nil {
		return err
	}
	failedAt := time.Since(start)
	stopBursts()
	end := sample()
	fmt.Printf("pending: %d of %d deliveries failed their first attempt after %s (%.0f/s)\n", recv.failed(), n,
		failedAt.Round(time.Millisecond), float64(recv.failed())/failedAt.Seconds())
	fmt.Printf("pending: idle for %s\n", cfg.idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.idle):
	}
	stopSampling()
	idle := sample()
	after, err := burst()
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if burstErr != nil {
		return fmt.Errorf("list under load: %w", burstErr)
	}

	fmt.Printf("\npending retries: %d events, each delivery failed once and waits on its retry timer; webhookd RSS (pid %d, /proc VmRSS):\n", n, cfg.pid)
	for _, c := range checkpoints(n) {
		if s, ok := firstAt(samples, c); ok {
			fmt.Printf("  %7d pending: %s (at %.0f s)\n", c, mb(s.rss), s.at.Seconds())
		} else {
			fmt.Printf("  %7d pending: not reached\n", c)
		}
	}
	fmt.Printf("  end (%d pending): %s; after %s idle: %s; peak %s at %d pending (%.0f s)\n",
		end.pending, mb(end.rss), cfg.idle, mb(idle.rss), mb(peak.rss), peak.pending, peak.at.Seconds())
	fmt.Printf("webhooks list (?limit=%d, one call at a time):\n", cfg.listLimit)
	fmt.Printf("  before:  %s\n", summarize(before).latencies())
	fmt.Printf("  during:  %s, in %d bursts every %s; worst burst's p99 %s\n", summarize(during).latencies(), burstN, cfg.listEvery,
		ms(summarize(burstP99).max))
	fmt.Printf("  after:   %s\n", summarize(after).latencies())
	if !all {
		return &incompleteError{missing: n - recv.failed(), waited: cfg.timeout}
	}
	return nil
}

// publishUntil publishes up to n events with the given number of closed-loop clients, and stops
// starting new ones once d (if positive) has passed: a publish under way is not canceled, so every
// event the stack accepted is counted. The first failed publish ends it.
func publishUntil(ctx context.Context, client *apiClient, n, clients int, d time.Duration, accepted *atomic.Int64) error {
	deadline := time.Now().Add(d)
	var started atomic.Int64
	return fanOut(clients, clients, func(int) error {
		for started.Add(1) <= int64(n) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if d > 0 && time.Now().After(deadline) {
				return nil
			}
			if _, err := client.publish(ctx); err != nil {
				return err
			}
			accepted.Add(1)
		}
		return nil
	})
}

// firstAt returns the first sample with at least pending deliveries failed.
func firstAt(samples []rssSample, pending int) (rssSample, bool) {
	for _, s := range samples {
		if s.pending >= pending {
			return s, true
		}
	}
	return rssSample{}, false
}
