package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/worker"
)

// cpuProcesses are the processes whose CPU time the tiers report: the stack's (serverProcesses),
// and this loadtest, which runs the receiver and the load generator on the same cores.
func cpuProcesses(cfg config) []cpuProcess {
	return append(serverProcesses(cfg), cpuProcess{name: "loadtest"})
}

// tierResult is one tier's figure: n deliveries from the first send to the last arrival.
type tierResult struct {
	name    string
	n       int
	elapsed time.Duration
	// cpu is the CPU time per delivery of each watched process, from the first send until the
	// server processes are quiet after the last arrival (settle).
	cpu cpuCost
	// ops is the Temporal server's store operations per delivery (-temporal-metrics), or "".
	ops string
	// statements is PostgreSQL's statements per delivery (-postgres-stats), or "".
	statements string
}

func (r tierResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// tiersResult is the tiers' figures: (b) in webhookd's own shape (the first attempt a local
// activity, eager start), and (b') with a regular activity, Temporal's textbook shape. (b) and (c)
// run in rounds, one after the other: this machine is shared, and its load moves within seconds, so
// one (b) beside one (c) can be a lucky or an unlucky pair.
type tiersResult struct {
	raw, bareRegular tierResult
	bare, e2e        []tierResult // one per round
}

// ratios are (c)/(b) of each round: how close webhookd comes to what Temporal itself allows in the
// same shape, under the same load.
func (r tiersResult) ratios() []float64 {
	var out []float64
	for i := range r.e2e {
		if r.e2e[i].n > 0 && r.bare[i].n > 0 {
			out = append(out, r.e2e[i].rate()/r.bare[i].rate())
		}
	}
	return out
}

// ratio is the median round's (c)/(b).
func (r tiersResult) ratio() float64 { return median(r.ratios()) }

// all lists the tiers in the order they ran.
func (r tiersResult) all() []tierResult {
	var out []tierResult
	for _, t := range append([]tierResult{r.raw, r.bareRegular}, interleave(r.bare, r.e2e)...) {
		if t.n > 0 {
			out = append(out, t)
		}
	}
	return out
}

// interleave is a[0], b[0], a[1], b[1], ...: the rounds in the order they ran.
func interleave(a, b []tierResult) []tierResult {
	var out []tierResult
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

// median is the middle value of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianCost is the median CPU time per delivery of each process across tiers (rounds of one tier).
func medianCost(tiers []tierResult) cpuCost {
	if len(tiers) == 0 {
		return cpuCost{}
	}
	c := cpuCost{names: tiers[0].cpu.names}
	for _, name := range c.names {
		var xs []float64
		for _, t := range tiers {
			xs = append(xs, t.cpu.of(name))
		}
		c.ms = append(c.ms, median(xs))
	}
	return c
}

// tiers measures, with the same receiver code, the same concurrency and the same Temporal server,
// what bounds webhookd's throughput: (a) raw HTTPS POSTs to the receiver, (b) bare Temporal, one
// workflow per delivery running one activity that makes the same POST, on a worker with webhookd's
// options, and (c) webhookd end to end (the throughput scenario). It prints a table with each
// tier's deliveries/s and CPU time per delivery, and (c)/(b): how close webhookd comes to what
// Temporal itself allows.
func tiers(ctx context.Context, cfg config, cert tls.Certificate, temporalOpts client.Options) error {
	cfg.events = orDefault(cfg.events, defaultEvents)
	r, err := measureTiers(ctx, cfg, cert, temporalOpts)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("| tier | deliveries/s | first send to last arrival | CPU ms per delivery |\n|---|---|---|---|\n")
	for _, t := range r.all() {
		fmt.Printf("| %s | %.0f | %s | %s |\n", t.name, t.rate(), t.elapsed.Round(time.Millisecond), t.cpu)
	}
	if len(r.e2e) > 1 {
		if cfg.tiers.has("b") {
			fmt.Printf("| (b), median of %d rounds | %.0f | | %s |\n", len(r.bare), median(rates(r.bare)), medianCost(r.bare))
		}
		if cfg.tiers.has("c") {
			fmt.Printf("| (c), median of %d rounds | %.0f | | %s |\n", len(r.e2e), median(rates(r.e2e)), medianCost(r.e2e))
		}
		if cfg.tiers.has("b") && cfg.tiers.has("c") {
			fmt.Printf("\n(c)/(b) by round: %s\n", formatRatios(r.ratios()))
		}
	}
	if cfg.tiers.has("b") && cfg.tiers.has("c") {
		fmt.Printf("\n(c)/(b): %.2f\n", r.ratio())
	}
	if cfg.temporalMetrics != "" {
		fmt.Printf("\nThe Temporal server's store operations per delivery (%s):\n", cfg.temporalMetrics)
		for _, t := range r.all() {
			fmt.Printf("- %s: %s\n", t.name, orNA(t.ops))
		}
	}
	if cfg.postgresStats != "" {
		fmt.Printf("\nPostgreSQL's statements per delivery (pg_stat_statements; execution time only):\n")
		for _, t := range r.all() {
			fmt.Printf("- %s:\n%s", t.name, t.statements)
		}
	}
	return nil
}

func rates(tiers []tierResult) []float64 {
	out := make([]float64, len(tiers))
	for i, t := range tiers {
		out[i] = t.rate()
	}
	return out
}

func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

// measureTiers is the tiers scenario without its report; cfg.events must be set.
func measureTiers(ctx context.Context, cfg config, cert tls.Certificate, temporalOpts client.Options) (tiersResult, error) {
	rounds := max(1, cfg.rounds)
	fmt.Printf("tiers: %d deliveries each, %d concurrent clients, (b) and (c) in %d rounds\n", cfg.events, cfg.concurrency, rounds)
	procs := cpuProcesses(cfg)
	stmts := openPGStatements(cfg.postgresStats)
	defer stmts.close()
	// withCPU runs one tier and notes what each watched process spent on it: its CPU time, the
	// Temporal server's store operations, PostgreSQL's statements.
	withCPU := func(measure func() (tierResult, error)) (tierResult, error) {
		stmts.reset(ctx)
		ops, before := scrapePersistence(ctx, cfg.temporalMetrics), readCPU(procs)
		r, err := measure()
		if err == nil {
			settle(ctx, procs)
		}
		r.cpu = cpuPerDelivery(procs, before, readCPU(procs), r.n)
		r.ops = persistencePerDelivery(ops, scrapePersistence(ctx, cfg.temporalMetrics), r.n)
		r.statements = stmts.report(ctx, r.n)
		return r, err
	}
	var res tiersResult
	var err error
	if cfg.tiers.has("a") {
		if res.raw, err = withCPU(func() (tierResult, error) { return rawTier(ctx, cfg, cert) }); err != nil {
			return tiersResult{}, fmt.Errorf("(a) raw HTTPS: %w", err)
		}
	}
	if cfg.tiers.has("b'") {
		if res.bareRegular, err = withCPU(func() (tierResult, error) { return bareTemporalTier(ctx, cfg, cert, temporalOpts, false) }); err != nil {
			return tiersResult{}, fmt.Errorf("(b') bare Temporal: %w", err)
		}
	}
	for round := 1; round <= rounds; round++ {
		suffix := ""
		if rounds > 1 {
			suffix = fmt.Sprintf(", round %d", round)
		}
		var bare, e2e tierResult
		if cfg.tiers.has("b") {
			bare, err = withCPU(func() (tierResult, error) { return bareTemporalTier(ctx, cfg, cert, temporalOpts, true) })
			if err != nil {
				return tiersResult{}, fmt.Errorf("(b) bare Temporal: %w", err)
			}
			bare.name += suffix
		}
		if cfg.tiers.has("c") {
			e2e, err = withCPU(func() (tierResult, error) {
				t, err := measureThroughput(ctx, cfg, cert, "(c) webhookd")
				return tierResult{name: "(c) webhookd end to end" + suffix, n: cfg.events, elapsed: t.total}, err
			})
			if err != nil {
				return tiersResult{}, fmt.Errorf("(c) webhookd: %w", err)
			}
		}
		res.bare, res.e2e = append(res.bare, bare), append(res.e2e, e2e)
	}
	return res, nil
}

// tierSet is the tiers a run measures (-tiers): a, b', b and c.
type tierSet []string

func (s tierSet) has(tier string) bool { return len(s) == 0 || slices.Contains(s, tier) }

// parseTiers parses -tiers: tiers separated by commas, each one of a, b', b and c.
func parseTiers(v string) (tierSet, error) {
	var s tierSet
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
		case "a", "b'", "b", "c":
			s = append(s, f)
		default:
			return nil, fmt.Errorf("-tiers %q: want tiers separated by commas among a, b', b and c", v)
		}
	}
	return s, nil
}

// receiverClient is an HTTPS client that trusts the loadtest certificate and keeps conns
// connections open, as webhookd's delivery client keeps its own.
func receiverClient(cert tls.Certificate, conns int) (*http.Client, error) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: conns,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// postDelivery sends one delivery-sized POST, counted by a deliveryCounter.
func postDelivery(ctx context.Context, c *http.Client, url string, i int) error {
	body := fmt.Appendf(nil, `{"eventType":"campaign.created","data":{"id":%d,"name":"Load","platform":"meta","status":"active"}}`, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Event", "campaign.created")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d", url, resp.StatusCode)
	}
	return nil
}

// rawTier POSTs cfg.events times with cfg.concurrency clients over keep-alive connections.
func rawTier(ctx context.Context, cfg config, cert tls.Certificate) (tierResult, error) {
	counter := newDeliveryCounter(int64(cfg.events))
	addr, stop, err := serveTLS("127.0.0.1:0", cert, counter)
	if err != nil {
		return tierResult{}, err
	}
	defer stop()
	hc, err := receiverClient(cert, cfg.concurrency)
	if err != nil {
		return tierResult{}, err
	}
	url := "https://" + addr + "/raw"
	start := time.Now()
	err = fanOut(cfg.events, cfg.concurrency, func(i int) error { return postDelivery(ctx, hc, url, i) })
	if err != nil {
		return tierResult{}, err
	}
	if err := awaitCounter(ctx, counter, cfg, "(a) raw HTTPS"); err != nil {
		return tierResult{}, err
	}
	return tierResult{name: "(a) raw HTTPS POST", n: cfg.events, elapsed: counter.lastArrival().Sub(start)}, nil
}

// bareActivities is the bare tier's one activity.
type bareActivities struct{ client *http.Client }

func (a *bareActivities) Post(ctx context.Context, url string, i int) error {
	return postDelivery(ctx, a.client, url, i)
}

// bareDelivery is the least a durable delivery can be: one workflow, one activity, with a timeout
// and Temporal's default retries. local runs the activity as a local activity, as webhookd runs
// a delivery's first attempt.
func bareDelivery(ctx workflow.Context, url string, i int, local bool) error {
	var a *bareActivities
	retry := &temporal.RetryPolicy{InitialInterval: time.Second}
	if local {
		ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
		return workflow.ExecuteLocalActivity(ctx, a.Post, url, i).Get(ctx, nil)
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	return workflow.ExecuteActivity(ctx, a.Post, url, i).Get(ctx, nil)
}

// bareTemporalTier starts cfg.events bareDelivery workflows with cfg.concurrency starters on a task
// queue of its own, served by a worker in this process with webhookd's worker options. local runs
// webhookd's shape: a local activity, and eager start (the starter and the worker share a client,
// as webhookd's API and worker do in one process).
func bareTemporalTier(ctx context.Context, cfg config, cert tls.Certificate, opts client.Options, local bool) (tierResult, error) {
	name := "(b') bare Temporal, one regular activity"
	if local {
		name = "(b) bare Temporal, one local activity, eager start"
	}
	counter := newDeliveryCounter(int64(cfg.events))
	addr, stop, err := serveTLS("127.0.0.1:0", cert, counter)
	if err != nil {
		return tierResult{}, err
	}
	defer stop()
	const slots = 200 // WEBHOOKD_MAX_CONCURRENT_DELIVERIES' default
	hc, err := receiverClient(cert, slots)
	if err != nil {
		return tierResult{}, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return tierResult{}, fmt.Errorf("dial Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	run := time.Now().UnixNano()
	queue := fmt.Sprintf("loadtest-bare-%d", run)
	w := sdkworker.New(c, queue, worker.MainWorkerOptions(slots))
	w.RegisterWorkflowWithOptions(bareDelivery, workflow.RegisterOptions{Name: "LoadtestBareDelivery"})
	w.RegisterActivity(&bareActivities{client: hc})
	if err := w.Start(); err != nil {
		return tierResult{}, err
	}
	defer w.Stop()

	url := "https://" + addr + "/bare"
	start := time.Now()
	var started atomic.Int64
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  %s: %d of %d workflows started, %d arrived\n", name, started.Load(), cfg.events, counter.received.Load())
	})
	defer stopProgress()
	err = fanOut(cfg.events, cfg.concurrency, func(i int) error {
		defer started.Add(1)
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("loadtest-bare-%d-%d", run, i), TaskQueue: queue, EnableEagerStart: local},
			"LoadtestBareDelivery", url, i, local)
		return err
	})
	if err != nil {
		return tierResult{}, err
	}
	stopProgress()
	if err := awaitCounter(ctx, counter, cfg, name); err != nil {
		return tierResult{}, err
	}
	return tierResult{name: name, n: cfg.events, elapsed: counter.lastArrival().Sub(start)}, nil
}

// fanOut calls do(0) to do(n-1) from the given number of goroutines and returns the first error.
func fanOut(n, goroutines int, do func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range goroutines {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// awaitCounter waits for every delivery, printing progress every cfg.progress.
func awaitCounter(ctx context.Context, counter *deliveryCounter, cfg config, label string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	tick := time.NewTicker(cfg.progress)
	defer tick.Stop()
	for {
		select {
		case <-counter.done:
			return nil
		case <-tick.C:
			fmt.Printf("  %s: %d of %d arrived\n", label, counter.received.Load(), counter.expected)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("only %d of %d deliveries arrived within %s", counter.received.Load(), counter.expected, cfg.timeout), ctx.Err())
		}
	}
}
