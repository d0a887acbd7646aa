package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The noisy-neighbour matrix (issue 40): for each heavy thing account B can do, account C's
// publish-to-receipt and API answer times, first with B idle, then during B's load, in one run.
// Each row is one small function (matrixrows.go) that prepares B's load and says where C's webhook
// goes; this file runs them alike and prints the table.

// matrixConfig is the scale of the rows (the -matrix-* flags); the hanging row takes -noisy-hooks,
// -noisy-events and -pause as the sharedhost scenario does.
type matrixConfig struct {
	rows        []string
	settle      time.Duration // between B's start and C's probes, in every row but the hanging one
	trialSettle time.Duration // and in the filter-trials row
	steadyHooks int           // sharedhost-tls and -auth: B's webhooks on the shared host
	steadyRate  float64       // and the events B publishes per second to them
	authToken   string        // sharedhost-auth: the token endpoint "reject"s or "hang"s
	filterHooks int           // heavy-filters: B's webhooks, each with a filter of filterTests tests
	filterTests int
	eventKiB    int // heavy-filters and filter-trials: the size of B's events
	publishers  int // heavy-filters: B's concurrent publishers
	stored      int // filter-trials: B's stored events the trials read
	trials      int // filter-trials: B's concurrent trials
	dataset     int // recover, portal, lists: B's events, each with a delivery of one webhook
	burst       int // burst: B's events
	readers     int // portal and lists: B's concurrent readers
	listHooks   int // lists: B's webhooks in its list
	quietCPU    float64
	drainMax    time.Duration
}

// check refuses a scale that cannot run.
func (mc matrixConfig) check() error {
	for _, n := range []int{mc.steadyHooks, mc.filterHooks, mc.filterTests, mc.publishers, mc.stored, mc.trials, mc.dataset, mc.burst, mc.readers} {
		if n < 1 {
			return errors.New("-matrix-steady-hooks, -matrix-filter-hooks, -matrix-filter-tests, -matrix-publishers, -matrix-stored, -matrix-trials, -matrix-dataset, -matrix-burst and -matrix-readers must be positive")
		}
	}
	switch {
	case mc.steadyRate <= 0 || mc.settle < 0 || mc.trialSettle < 0 || mc.listHooks < 0 || mc.quietCPU <= 0 || mc.drainMax < 0:
		return errors.New("-matrix-steady-rate and -matrix-quiet must be positive, -matrix-settle, -matrix-trial-settle, -matrix-list-hooks and -matrix-drain-max not negative")
	case mc.eventKiB < 1 || mc.eventKiB<<10 > maxEventBody:
		return fmt.Errorf("-matrix-event-kib %d: want 1 to %d (the API's limit on an event)", mc.eventKiB, maxEventBody>>10)
	case mc.authToken != "reject" && mc.authToken != "hang":
		return fmt.Errorf("-matrix-auth-token %q: want reject or hang", mc.authToken)
	}
	return nil
}

// matrixRowSpec names a row and the function that prepares it.
type matrixRowSpec struct {
	name    string
	prepare func(m *matrix, ctx context.Context) (*noisyLoad, error)
}

// matrixRows are the rows in the order they run: the hanging host first, as issue 17's scenario
// measures it on a fresh stack; replay after recover, on a data set of its own, and waited for to
// its end; recover before it, since the recovery it starts goes on for minutes
// after the row (disabling the webhook holds each delivery at its next attempt, but every one
// still takes its turn), and portal and lists read the data set before it is replayed.
var matrixRows = []matrixRowSpec{
	{"sharedhost-hang", (*matrix).sharedHostHang},
	{"sharedhost-tls", (*matrix).sharedHostTLS},
	{"sharedhost-auth", (*matrix).sharedHostAuth},
	{"heavy-filters", (*matrix).heavyFilters},
	{"filter-trials", (*matrix).filterTrials},
	{"burst", (*matrix).burst},
	{"ordered-hotkey", (*matrix).orderedHotKey},
	{"portal", (*matrix).portal},
	{"lists", (*matrix).lists},
	{"recover", (*matrix).recoverDataset},
	{"replay", (*matrix).replayDataset},
	{"replay-filter", (*matrix).replayFilter},
}

// parseMatrixRows checks a -matrix-rows list against the rows; "all" or "" is every row.
func parseMatrixRows(s string) ([]string, error) {
	var all []string
	for _, r := range matrixRows {
		all = append(all, r.name)
	}
	if s == "" || s == "all" {
		return all, nil
	}
	var rows []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(all, name) {
			return nil, fmt.Errorf("-matrix-rows: unknown row %q; want some of %s", name, strings.Join(all, ","))
		}
		rows = append(rows, name)
	}
	return rows, nil
}

// noisyLoad is what a row prepared before C's idle probes: where C's webhook goes, and B's heavy
// thing, started after them.
type noisyLoad struct {
	about  string         // B's heavy thing with its scale, for the table
	cURL   string         // C's webhook: on B's receiver host and port, or on a host of its own
	cTLS   map[string]any // C's webhook's tls setting; nil: none
	settle time.Duration  // between B's start and C's probes
	// run is B's heavy thing: it returns when it is done, or when ctx ends.
	run func(ctx context.Context)
	// finish: after C's probes the row waits for run to end instead of stopping it (a burst of
	// so many events is published whole).
	finish bool
	// work is what B has done so far, for progress lines and the table.
	work func() string
	// end stops what B's load left running on the stack (deletes B's webhooks); nil: nothing.
	end   func(ctx context.Context)
	stops []func() // the row's receivers
}

// close ends B's load on the stack, then stops the row's receivers.
func (l *noisyLoad) close(ctx context.Context) {
	if l.end != nil {
		l.end(ctx)
	}
	for _, stop := range l.stops {
		stop()
	}
}

// matrix is one run of the scenario: both accounts, C's receiver, and what several rows share.
type matrix struct {
	cfg   config
	cert  tls.Certificate
	b, c  *apiClient
	cRecv *arrivals    // every delivery C's webhooks get, in every row
	procs []cpuProcess // the stack's processes, whose CPU tells when it is quiet

	data      *dataset // B's webhook with many held deliveries, once made
	bigStored bool     // B's big events for the filter trials, once stored
}

// cPhase is what C's probes measured in one phase of a row.
type cPhase struct {
	pubs      []publication
	receipts  summary // publish-to-receipt of each accepted event
	api       summary // answer time of each API call, failed ones included
	apiFailed int
	// rss is webhookd's (-pid) largest resident memory over the phase: C's probes with B idle,
	// B's whole load in the other (0: no -pid).
	rss int64
}

// matrixResult is one row of the table.
type matrixResult struct {
	name, load   string
	idle, during cPhase
	failed       string // C's failed attempts during B's load, with their classes
	idleFailed   string // and before it, which should be none
	work         string // what B did
	err          error  // the row could not be measured
}

// matrixScenario runs the rows in turn, each with fresh webhooks on the same two accounts, and
// prints the table. A row that cannot be measured is reported in the table and does not stop the
// others; a C event still missing at the end of its wait makes the figures lower bounds.
func matrixScenario(ctx context.Context, cfg config, cert tls.Certificate) error {
	m := &matrix{cfg: cfg, cert: cert, b: newAPIClient(cfg.api, cfg.noisyKey, 64), c: newAPIClient(cfg.api, cfg.key, 16),
		cRecv: newArrivals(), procs: serverProcesses(cfg)}
	// A call is timed to its answer, however late, up to the wait for a delivery; B's heavy calls
	// (a filter trial over big events) may take minutes, and a client that gave up would let the
	// server's work pile up behind the next one.
	m.c.http.Timeout, m.b.http.Timeout = max(cfg.timeout, 30*time.Second), 10*time.Minute
	if len(m.procs) == 0 {
		fmt.Println("no -pid or -temporal-pid: between rows, the matrix waits -matrix-drain-max instead of until the stack is quiet")
	}
	var results []matrixResult
	for _, spec := range matrixRows {
		if !slices.Contains(cfg.matrix.rows, spec.name) || ctx.Err() != nil {
			continue
		}
		if len(results) > 0 {
			m.quiet(ctx, "before row "+spec.name, cfg.matrix.drainMax)
		}
		r := m.row(ctx, spec)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: row %s: %v\n", r.name, r.err)
		}
		results = append(results, r)
	}
	if err := writeMatrixTable(os.Stdout, cfg, results); err != nil {
		return err
	}
	missing, failed := 0, 0
	for _, r := range results {
		missing += r.idle.receipts.missing + r.during.receipts.missing
		if r.err != nil {
			failed++
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d rows could not be measured", failed, len(results))
	}
	if missing > 0 {
		return &incompleteError{missing: missing, waited: cfg.timeout}
	}
	return nil
}

// row prepares a row, registers C's webhook, probes C with B idle, then during B's load, and reads
// C's failed attempts.
func (m *matrix) row(ctx context.Context, spec matrixRowSpec) matrixResult {
	res := matrixResult{name: spec.name}
	fmt.Printf("\n== row %s\n", spec.name)
	load, err := spec.prepare(m, ctx)
	if load != nil {
		defer load.close(ctx)
		res.load = fmt.Sprintf("%s; C probes %s after B starts", load.about, load.settle)
	}
	if err != nil {
		res.err = err
		return res
	}
	hook := map[string]any{"url": load.cURL, "eventType": "campaign.created"}
	if load.cTLS != nil {
		hook["tls"] = load.cTLS
	}
	cHook, err := m.c.registerWebhook(ctx, hook)
	if err != nil {
		res.err = fmt.Errorf("account C (-key): %w", err)
		return res
	}
	defer deleteWebhooks(ctx, m.c, []int64{cHook})
	fmt.Printf("B: %s\nC: webhook %d at %s\n", load.about, cHook, load.cURL)

	rss := watchRSS(m.cfg.pid)
	res.idle, err = m.probeC(ctx, cHook, "B idle", nil)
	res.idle.rss = rss.Stop()
	if err != nil {
		res.err = err
		return res
	}
	if res.during, res.work, err = m.underLoad(ctx, load, cHook); err != nil {
		res.err = err
		return res
	}
	ds, err := m.c.deliveries(ctx, cHook)
	if err != nil {
		res.err = fmt.Errorf("account C's deliveries: %w", err)
		return res
	}
	res.failed, res.idleFailed = failedAttempts(ds, res.during.pubs), failedAttempts(ds, res.idle.pubs)
	return res
}

// underLoad starts B's load, waits its settle, probes C, then stops B's load, or waits for its end
// when it is to finish; it returns C's phase and what B did.
func (m *matrix) underLoad(ctx context.Context, load *noisyLoad, cHook int64) (cPhase, string, error) {
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	var wg sync.WaitGroup
	var ended atomic.Bool
	rss := watchRSS(m.cfg.pid)
	wg.Go(func() { load.run(bctx); ended.Store(true) })
	progress := func() { fmt.Printf("  B: %s\n", load.work()) }
	fmt.Printf("B's load started; C waits %s\n", load.settle)
	pollUntil(ctx, time.Now().Add(load.settle), m.cfg.progress, func() bool { return false }, progress)
	during, err := m.probeC(ctx, cHook, "during B's load", load.work)
	if load.finish {
		fmt.Println("waiting for B's load to end")
		pollUntil(ctx, time.Now().Add(time.Hour), m.cfg.progress, ended.Load, progress)
	}
	stopB()
	wg.Wait()
	during.rss = rss.Stop()
	work := load.work()
	fmt.Printf("B's load stopped: %s\n", work)
	return during, work, err
}

// probeC publishes cfg.probes events as C, one every cfg.probeEvery (open loop), and with each
// lists C's webhooks; it times both calls, then waits for the deliveries (cfg.timeout at most).
// work, when not nil, is B's progress for the waiting lines.
func (m *matrix) probeC(ctx context.Context, hook int64, phase string, work func() string) (cPhase, error) {
	fmt.Printf("C, %s: %d events, one every %s, each with GET /webhooks\n", phase, m.cfg.probes, m.cfg.probeEvery)
	var (
		mu      sync.Mutex
		p       cPhase
		calls   []obs
		lastErr error
		wg      sync.WaitGroup
	)
	timed := func(call func() error) {
		start := time.Now()
		err := call()
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, obs{d: time.Since(start)})
		if err != nil {
			p.apiFailed++
			lastErr = err
		}
	}
	tick := time.NewTicker(m.cfg.probeEvery)
	defer tick.Stop()
	for i := range m.cfg.probes {
		if i > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return cPhase{}, ctx.Err()
			case <-tick.C:
			}
		}
		wg.Go(func() {
			timed(func() error {
				start := time.Now()
				res, err := m.c.publish(ctx)
				if err == nil {
					mu.Lock()
					p.pubs = append(p.pubs, publication{eventID: res.ID, start: start})
					mu.Unlock()
				}
				return err
			})
			timed(func() error { _, err := m.c.listWebhooks(ctx, "limit=50"); return err })
		})
	}
	wg.Wait()
	if lastErr != nil {
		fmt.Printf("  %d of C's API calls failed, the last with: %v\n", p.apiFailed, lastErr)
	}
	slices.SortFunc(p.pubs, func(a, b publication) int { return a.start.Compare(b.start) })
	waitForReceipts(ctx, p.pubs, hook, m.cRecv, time.Now().Add(m.cfg.timeout), m.cfg.progress, func(n int) {
		line := fmt.Sprintf("  %d of %d of C's deliveries arrived", n, len(p.pubs))
		if work != nil {
			line += "; B: " + work()
		}
		fmt.Println(line)
	})
	p.receipts, p.api = summarize(receipts(p.pubs, hook, m.cRecv, time.Now())), summarize(calls)
	fmt.Printf("  receipts p50 %s, max %s; API p50 %s, max %s\n", p.receipts.p50, p.receipts.max, p.api.p50, p.api.max)
	return p, ctx.Err()
}

// quiet waits until the stack's processes together use less than cfg.matrix.quietCPU of one core
// over two seconds, for at most limit: what B left behind (deliveries ending, workflows closing)
// must not slow the next row's idle probes. Without the processes' ids it waits limit.
func (m *matrix) quiet(ctx context.Context, why string, limit time.Duration) {
	start := time.Now()
	if len(m.procs) == 0 {
		fmt.Printf("%s: waiting %s\n", why, limit)
		sleep(ctx, limit)
		return
	}
	meter := startCPUMeter(m.procs, 0)
	last := start
	for ctx.Err() == nil && time.Since(start) < limit {
		sleep(ctx, 2*time.Second)
		var w cpuWindow
		w, meter = meter.lap("", 0)
		share := w.spent.total() / float64(w.length.Milliseconds())
		if share < m.cfg.matrix.quietCPU {
			fmt.Printf("%s: the stack is quiet after %s (%.0f%% of a core)\n", why, time.Since(start).Round(time.Second), share*100)
			return
		}
		if time.Since(last) >= m.cfg.progress {
			fmt.Printf("%s: waiting for the stack to be quiet: %s\n", why, cpuProgress(w))
			last = time.Now()
		}
	}
	fmt.Printf("%s: the stack is not quiet after %s; going on\n", why, limit)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// apart starts C's receiver and B's on hosts of their own, as two customers' are: C's at
// cfg.healthyHost on -listen, B's, which answers 204 at once, at 127.0.0.1 on -hang-listen. It
// returns the row's load with C's URL and the receivers set, B's receiver and its base URL.
func (m *matrix) apart(about string) (*noisyLoad, *hangingReceiver, string, error) {
	load := &noisyLoad{about: about, settle: m.cfg.matrix.settle}
	cAddr, stop, err := serveTLS(m.cfg.listen, m.cert, m.cRecv)
	if err != nil {
		return nil, nil, "", fmt.Errorf("receiver of account C: %w", err)
	}
	load.stops = append(load.stops, stop)
	_, port, err := net.SplitHostPort(cAddr)
	if err != nil {
		load.close(context.Background())
		return nil, nil, "", err
	}
	load.cURL = "https://" + net.JoinHostPort(m.cfg.healthyHost, port) + "/c"
	fast := &hangingReceiver{}
	fast.fast.Store(true)
	bAddr, stop, err := serveTLS(m.cfg.hangListen, m.cert, fast)
	if err != nil {
		load.close(context.Background())
		return nil, nil, "", fmt.Errorf("receiver of account B: %w", err)
	}
	load.stops = append(load.stops, stop)
	return load, fast, "https://" + bAddr, nil
}

// shared starts one receiver on -listen for both accounts: C's webhook at /c, and B's paths in
// mux. It returns the row's load with C's URL and the receiver set, and the receiver's base URL.
func (m *matrix) shared(about string, mux *http.ServeMux, tlsConfig *tls.Config, errorLog io.Writer) (*noisyLoad, string, error) {
	mux.Handle("/c", m.cRecv)
	if tlsConfig == nil {
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{m.cert}}
	}
	addr, stop, err := serveTLSConfig(m.cfg.listen, tlsConfig, mux, quietLogger(errorLog))
	if err != nil {
		return nil, "", fmt.Errorf("the shared receiver: %w", err)
	}
	base := "https://" + addr
	return &noisyLoad{about: about, cURL: base + "/c", settle: m.cfg.matrix.settle, stops: []func(){stop}}, base, nil
}

// deleting is an end that deletes B's webhooks ids, which ends their deliveries.
func (m *matrix) deleting(ids *[]int64) func(ctx context.Context) {
	return func(ctx context.Context) {
		fmt.Printf("deleting B's %d webhooks\n", len(*ids))
		deleteWebhooks(ctx, m.b, *ids)
	}
}

// registerB registers n webhooks of account B, bodyFor(i) each, setUpConcurrency at a time, and
// adds their ids to ids even when one fails, so that the row's end deletes what was made.
func (m *matrix) registerB(ctx context.Context, n int, ids *[]int64, bodyFor func(i int) map[string]any) error {
	made := make([]int64, n)
	err := fanOut(n, setUpConcurrency, func(i int) error {
		id, err := m.b.registerWebhook(ctx, bodyFor(i))
		made[i] = id
		return err
	})
	*ids = append(*ids, registered(made)...)
	if err != nil {
		return fmt.Errorf("account B (-noisy-key): %w", err)
	}
	fmt.Printf("B: %d webhooks registered\n", n)
	return nil
}

// writeMatrixTable writes the rows as one markdown table, after a blank line and a caption, so
// that caption, table and notes are the output's last paragraph (what bench-isolation.sh prints).
func writeMatrixTable(w io.Writer, cfg config, results []matrixResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nnoisy neighbours: account C's publish-to-receipt and API answer times (POST /events and GET /webhooks, %d of each per phase, one every %s), "+
		"with B idle, then during B's load, times in seconds; ratio: during over idle, of p50 / of max; ≥: not arrived within %s\n",
		cfg.probes, cfg.probeEvery, cfg.timeout)
	b.WriteString("| row | B's load | C receipt idle p50 / max | during p50 / max | ratio | C API idle p50 / max | during p50 / max | ratio | C failed attempts | webhookd peak RSS idle / during | what B did |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var notes []string
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(&b, "| %s | %s | - | - | - | - | - | - | - | - | not measured: %s |\n", r.name, r.load, cell(r.err.Error()))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name, r.load,
			pair(r.idle.receipts), pair(r.during.receipts), ratios(r.during.receipts, r.idle.receipts),
			apiPair(r.idle), apiPair(r.during), ratios(r.during.api, r.idle.api),
			r.failed, rssPair(r.idle.rss, r.during.rss), cell(r.work))
		if r.idleFailed != "0" {
			notes = append(notes, fmt.Sprintf("%s: C had %s failed attempts with B idle", r.name, r.idleFailed))
		}
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rssPair is webhookd's peak RSS with B idle and during B's load, "-" without -pid.
func rssPair(idle, during int64) string {
	if idle == 0 && during == 0 {
		return "-"
	}
	return mb(idle) + " / " + mb(during)
}

// pair is a phase's "p50 / max" in seconds.
func pair(s summary) string {
	if s.events == 0 {
		return "-"
	}
	return secs(s.p50) + " / " + secs(s.max)
}

// apiPair is pair for a phase's API calls, with how many failed.
func apiPair(p cPhase) string {
	s := pair(p.api)
	if p.apiFailed > 0 {
		s += fmt.Sprintf(" (%d failed)", p.apiFailed)
	}
	return s
}

// ratios is "p50 ratio / max ratio" of during over idle.
func ratios(during, idle summary) string {
	if during.events == 0 || idle.events == 0 {
		return "-"
	}
	return ratio(during.p50, idle.p50) + " / " + ratio(during.max, idle.max)
}

// secs is a time in seconds with three decimals, "≥ " before a lower bound.
func secs(o obs) string {
	s := fmt.Sprintf("%.3f", o.d.Seconds())
	if o.lowerBound {
		return "≥ " + s
	}
	return s
}

// cell makes text fit in a markdown table cell: one line, no column separator.
func cell(text string) string {
	return strings.NewReplacer("|", "/", "\n", " ").Replace(text)
}

// quietLogger is a server error log writing to w, nil for none given.
func quietLogger(w io.Writer) *log.Logger {
	if w == nil {
		return nil
	}
	return log.New(w, "", 0)
}
