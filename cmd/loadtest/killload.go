package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
)

// killLoadMarker starts the line killLoad prints as it starts publishing. bench-kill.sh waits for
// it to time its SIGKILL from there, not from loadtest's start (registering webhooks takes a
// varying while).
const killLoadMarker = "killload: publishing"

// killLoad checks the promise that a 202 from POST /events means the event is committed and will be
// delivered at least once to every webhook it matched, however webhookd dies. Accounts C (-key) and
// B (-noisy-key) each have three webhooks on one receiver, one host and port: /ok/<a>/limited (with
// rateLimit -hook-rate-limit, below the publish rate, so its attempts always queue for turns),
// /ok/<a>/plain, and /flaky/<a>, which answers 503 to the first request of each Webhook-Id and 200
// after (so retries run). Healthy answers come after -answer-delay, so that a low
// WEBHOOKD_HOST_CONCURRENCY makes attempts wait for the host too. Each account publishes -rate
// events/s for -duration, open loop; meanwhile something else (bench-kill.sh) SIGKILLs webhookd and
// starts it again. Then killLoad waits up to -timeout for every accepted event's deliveries,
// checks webhookd's own delivery records, and reports what is missing, what arrived twice, what
// arrived although its publish got no 202, and the publishes that failed. Anything accepted and
// missing is an error: loadtest exits 1.
func killLoad(ctx context.Context, cfg config, cert tls.Certificate) error {
	book := newReceiptBook(cfg.answerDelay)
	addr, stop, err := serveTLS(cfg.listen, cert, book)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	defer stop()
	base := "https://" + addr

	accounts := []*killAccount{
		{name: "C", client: newAPIClient(cfg.api, cfg.key, 64)},
		{name: "B", client: newAPIClient(cfg.api, cfg.noisyKey, 64)},
	}
	for _, a := range accounts {
		if err := a.register(ctx, base, cfg.hookRateLimit); err != nil {
			deleteKillHooks(ctx, accounts)
			return err
		}
		fmt.Printf("account %s: webhooks %s\n", a.name, a.hookList())
	}

	lives := &lifeLog{}
	sample := func() { lives.add(scrapeCounters(ctx, cfg.api)) }
	sample()
	start := time.Now()
	fmt.Printf("%s %g events/s per account for %s, open loop\n", killLoadMarker, cfg.rate, cfg.duration)
	stopSampling := every(time.Second, sample)
	pubErrs := &publishErrors{start: start}
	progress := func() {
		c := countKill(accounts, book.snapshot())
		fmt.Printf("  +%3.0f s: %d events accepted, %s; %d of %d deliveries arrived\n",
			time.Since(start).Seconds(), c.accepted, pubErrs.count(), c.delivered, c.expected)
	}
	err = publishKill(ctx, cfg, accounts, pubErrs, progress)
	stopSampling()
	if err != nil {
		return err
	}

	deadline := time.Now().Add(cfg.timeout)
	fmt.Printf("published; waiting up to %s for every accepted event's deliveries\n", cfg.timeout)
	allArrived := pollUntil(ctx, deadline, cfg.progress,
		func() bool { return len(countKill(accounts, book.snapshot()).missing) == 0 }, progress)
	if err := ctx.Err(); err != nil {
		return err
	}
	var recs killRecords
	if allArrived {
		// A delivery whose 2xx came as webhookd died is retried and arrives twice: wait for
		// webhookd's records to agree that everything is delivered, then for the receiver to go
		// quiet, so that such repeats are counted.
		recs = awaitRecords(ctx, cfg, accounts, deadline)
		pollUntil(ctx, deadline, cfg.progress,
			func() bool { return time.Since(book.lastReceipt()) >= killLoadQuiet }, progress)
	} else {
		recs = readRecords(ctx, accounts)
	}
	lives.add(scrapeCounters(ctx, cfg.api))
	if err := ctx.Err(); err != nil {
		return err
	}

	c := countKill(accounts, book.snapshot())
	if err := reportKill(os.Stdout, cfg, c, pubErrs, recs, lives); err != nil {
		return err
	}
	if len(c.missing) > 0 {
		fmt.Println("the webhooks are kept, so that their deliveries can be inspected")
		return fmt.Errorf("%d of %d deliveries of accepted events are missing %s after the last publish",
			len(c.missing), c.expected, cfg.timeout)
	}
	deleteKillHooks(ctx, accounts)
	return nil
}

// killLoadQuiet is how long the receiver must have seen nothing before the report, once every
// delivery arrived and webhookd's records say so: repeats of deliveries caught by the kill come
// within a few seconds of that.
const killLoadQuiet = 5 * time.Second

// killHook is one of an account's webhooks on the shared receiver.
type killHook struct {
	id        int64
	path      string
	rateLimit int // 0: none
}

// killAccount is one account of killLoad: its webhooks and the events its publishes got a 202 for.
type killAccount struct {
	name   string
	client *apiClient
	hooks  []killHook

	mu       sync.Mutex
	accepted []int64
	// unmatched counts accepted events whose 202 named fewer or more matched webhooks than the
	// account has: their expected deliveries are counted from the webhooks all the same.
	unmatched int
}

// register creates the account's three webhooks on the receiver at base.
func (a *killAccount) register(ctx context.Context, base string, rateLimit int) error {
	n := strings.ToLower(a.name)
	for _, h := range []killHook{
		{path: "/ok/" + n + "/limited", rateLimit: rateLimit},
		{path: "/ok/" + n + "/plain"},
		{path: "/flaky/" + n},
	} {
		body := map[string]any{"url": base + h.path, "eventType": "campaign.created"}
		if h.rateLimit > 0 {
			body["rateLimit"] = h.rateLimit
		}
		var out struct {
			ID int64 `json:"id"`
		}
		if err := a.client.doPatiently(ctx, http.MethodPost, "/api/svc/v2/webhooks", body, &out); err != nil {
			return fmt.Errorf("account %s: register %s: %w", a.name, h.path, err)
		}
		h.id = out.ID
		a.hooks = append(a.hooks, h)
	}
	return nil
}

func (a *killAccount) hookList() string {
	var parts []string
	for _, h := range a.hooks {
		s := fmt.Sprintf("%d %s", h.id, h.path)
		if h.rateLimit > 0 {
			s += fmt.Sprintf(" (rateLimit %d/s)", h.rateLimit)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func (a *killAccount) accept(p published) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.accepted = append(a.accepted, p.ID)
	if p.Matched != len(a.hooks) {
		a.unmatched++
	}
}

func (a *killAccount) events() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.accepted)
}

// deleteKillHooks deletes the webhooks killLoad registered.
func deleteKillHooks(ctx context.Context, accounts []*killAccount) {
	for _, a := range accounts {
		var ids []int64
		for _, h := range a.hooks {
			ids = append(ids, h.id)
		}
		deleteWebhooks(ctx, a.client, ids)
	}
}

// publishKill publishes cfg.rate events/s per account for cfg.duration, each publish in its own
// goroutine (open loop: a dead webhookd does not slow the publishers), and returns once every
// publish has returned. It calls progress every cfg.progress.
func publishKill(ctx context.Context, cfg config, accounts []*killAccount, errs *publishErrors, progress func()) error {
	stopProgress := every(cfg.progress, progress)
	defer stopProgress()
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for range int(cfg.rate * cfg.duration.Seconds()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for _, a := range accounts {
			wg.Go(func() {
				at := time.Now()
				p, err := a.client.publish(ctx)
				if err != nil {
					errs.add(at, err)
					return
				}
				a.accept(p)
			})
		}
	}
	return nil
}

// publishErrors counts the publishes that got no 202, by kind, and when they were sent.
type publishErrors struct {
	start       time.Time
	mu          sync.Mutex
	byClass     map[string]int
	first, last time.Duration // since start, of the failed publishes' sending
}

func (e *publishErrors) add(at time.Time, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byClass == nil {
		e.byClass = map[string]int{}
		e.first = at.Sub(e.start)
	}
	e.first, e.last = min(e.first, at.Sub(e.start)), max(e.last, at.Sub(e.start))
	e.byClass[publishErrorClass(err)]++
}

func (e *publishErrors) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.byClass {
		n += c
	}
	return n
}

// count is "3 publishes failed" for progress lines.
func (e *publishErrors) count() string {
	return fmt.Sprintf("%d publishes failed", e.total())
}

// String is "0", or "31 (sent +8.1 s to +12.9 s; connection refused 28, EOF 3)".
func (e *publishErrors) String() string {
	n := e.total()
	e.mu.Lock()
	defer e.mu.Unlock()
	if n == 0 {
		return "0"
	}
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(e.byClass)) {
		parts = append(parts, fmt.Sprintf("%s %d", class, e.byClass[class]))
	}
	return fmt.Sprintf("%d (sent +%.1f s to +%.1f s; %s)", n, e.first.Seconds(), e.last.Seconds(), strings.Join(parts, ", "))
}

// publishErrorClass names why a publish got no 202: the API's status, or what the connection did.
// "connection reset" and "EOF" are requests webhookd had read when it died: their events may have
// been committed all the same.
func publishErrorClass(err error) string {
	var se *statusError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return "HTTP " + strconv.Itoa(se.status)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other (" + err.Error() + ")"
}

// tally is what the receiver did with the requests of one Webhook-Id.
type tally struct {
	ok      int // answered 2xx
	refused int // answered 503: a flaky endpoint's first request
	cut     int // the client went away before the answer (webhookd died meanwhile)
}

// receiptBook is killLoad's one receiver, every path on one host and port. It records every
// request by its Webhook-Id. Paths under /flaky/ answer 503 to the first request of each Webhook-Id
// and 200 to the next ones; the others answer 200 after delay, unless the client goes first.
type receiptBook struct {
	delay time.Duration
	mu    sync.Mutex
	byID  map[string]*tally
	last  time.Time
}

func newReceiptBook(delay time.Duration) *receiptBook {
	return &receiptBook{delay: delay, byID: map[string]*tally{}, last: time.Now()}
}

func (b *receiptBook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("Webhook-Id")
	b.mu.Lock()
	t := b.byID[id]
	if t == nil {
		t = &tally{}
		b.byID[id] = t
	}
	first := *t == tally{}
	b.last = time.Now()
	if first && strings.HasPrefix(r.URL.Path, "/flaky/") {
		t.refused++
		b.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	b.mu.Unlock()
	if b.delay > 0 {
		timer := time.NewTimer(b.delay)
		defer timer.Stop()
		select {
		case <-r.Context().Done():
			b.mu.Lock()
			t.cut++
			b.mu.Unlock()
			return
		case <-timer.C:
		}
	}
	b.mu.Lock()
	t.ok++
	b.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// snapshot copies the tallies by Webhook-Id.
func (b *receiptBook) snapshot() map[string]tally {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]tally, len(b.byID))
	for id, t := range b.byID {
		out[id] = *t
	}
	return out
}

func (b *receiptBook) lastReceipt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// killCount is killLoad's verdict, from the accepted events and the receiver's tallies.
type killCount struct {
	accepted, expected, delivered int
	unmatched                     int      // accepted events whose 202 named another number of webhooks
	missing                       []string // Webhook-Ids of expected deliveries never answered 2xx
	twice                         int      // expected deliveries answered 2xx more than once
	// Deliveries to our webhooks of events whose publish got no 202 (in flight at the kill: their
	// events were committed as webhookd died), and how many events they were.
	unacknowledged, unacknowledgedEvents int
	foreign                              int // Webhook-Ids naming none of our webhooks, or none at all
	refused, cut                         int // requests answered 503 by design, and cut off
	resent                               int // Webhook-Ids cut off, then answered 2xx: they arrived twice too
}

func countKill(accounts []*killAccount, receipts map[string]tally) killCount {
	var c killCount
	owner := map[int64]*killAccount{}
	accepted := map[int64]bool{}
	for _, a := range accounts {
		events := a.events()
		a.mu.Lock()
		c.unmatched += a.unmatched
		a.mu.Unlock()
		c.accepted += len(events)
		for _, h := range a.hooks {
			owner[h.id] = a
		}
		for _, ev := range events {
			accepted[ev] = true
			for _, h := range a.hooks {
				c.expected++
				t := receipts[messageID(ev, h.id)]
				if t.ok == 0 {
					c.missing = append(c.missing, messageID(ev, h.id))
					continue
				}
				c.delivered++
				if t.ok > 1 {
					c.twice++
				}
			}
		}
	}
	unackEvents := map[int64]bool{}
	for id, t := range receipts {
		c.refused += t.refused
		c.cut += t.cut
		if t.cut > 0 && t.ok > 0 {
			c.resent++
		}
		ev, hook, ok := parseMessageID(id)
		if !ok || owner[hook] == nil {
			c.foreign++
			continue
		}
		if !accepted[ev] {
			c.unacknowledged++
			unackEvents[ev] = true
		}
	}
	c.unacknowledgedEvents = len(unackEvents)
	slices.Sort(c.missing)
	return c
}

// parseMessageID is messageID's inverse.
func parseMessageID(id string) (eventID, webhookID int64, ok bool) {
	rest, found := strings.CutPrefix(id, "msg_")
	if !found {
		return 0, 0, false
	}
	ev, hook, found := strings.Cut(rest, "_")
	if !found {
		return 0, 0, false
	}
	eventID, err1 := strconv.ParseInt(ev, 10, 64)
	webhookID, err2 := strconv.ParseInt(hook, 10, 64)
	return eventID, webhookID, err1 == nil && err2 == nil
}

// killRecords is webhookd's own delivery log of killLoad's webhooks (GET .../deliveries): the
// state of each delivery by Webhook-Id.
type killRecords struct {
	err   error
	state map[string]delivery
}

// String is "1083 deliveries: delivered 1080, retrying 3".
func (r killRecords) String() string {
	if r.err != nil {
		return "not read: " + r.err.Error()
	}
	states := map[string]int{}
	for _, d := range r.state {
		states[d.State]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, states[s]))
	}
	return fmt.Sprintf("%d deliveries: %s", len(r.state), strings.Join(parts, ", "))
}

func (r killRecords) allDelivered() bool {
	if r.err != nil {
		return false
	}
	for _, d := range r.state {
		if d.State != "delivered" {
			return false
		}
	}
	return true
}

func readRecords(ctx context.Context, accounts []*killAccount) killRecords {
	r := killRecords{state: map[string]delivery{}}
	for _, a := range accounts {
		for _, h := range a.hooks {
			ds, err := a.client.deliveries(ctx, h.id)
			if err != nil {
				return killRecords{err: fmt.Errorf("webhook %d's deliveries: %w", h.id, err)}
			}
			for _, d := range ds {
				r.state[messageID(d.EventID, h.id)] = d
			}
		}
	}
	return r
}

// awaitRecords reads webhookd's delivery records every second until every one is delivered or the
// deadline passes, and returns the last reading.
func awaitRecords(ctx context.Context, cfg config, accounts []*killAccount, deadline time.Time) killRecords {
	lastProgress := time.Now()
	for {
		r := readRecords(ctx, accounts)
		if r.allDelivered() || time.Now().After(deadline) || ctx.Err() != nil {
			return r
		}
		if time.Since(lastProgress) >= cfg.progress {
			fmt.Printf("  every delivery arrived; webhookd's records: %s\n", r)
			lastProgress = time.Now()
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(time.Second):
		}
	}
}

// lifeLog keeps the last scrape of webhookd's counters in each of its processes, told apart by
// their start time (process_start_time_seconds).
type lifeLog struct {
	mu    sync.Mutex
	lives []scrape
}

// scrape is one reading of webhookd's /metrics: its process's start time, and waitsMetric and
// startsMetric keyed "<family> <label value>".
type scrape struct {
	started  float64
	counters map[string]float64
}

func (l *lifeLog) add(s scrape, ok bool) {
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.lives); n > 0 && l.lives[n-1].started == s.started {
		l.lives[n-1] = s
		return
	}
	l.lives = append(l.lives, s)
}

// String is one line per process: what its counters said at its last scrape.
func (l *lifeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lives) == 0 {
		return "  /metrics not read\n"
	}
	var b strings.Builder
	for i, s := range l.lives {
		fmt.Fprintf(&b, "  process %d: attempts held for a turn: %s; delivery workflows started by: %s\n", i+1,
			labelled(s.counters, waitsMetric), labelled(s.counters, startsMetric))
	}
	return b.String()
}

// labelled formats one counter family of a scrape: "host_cap 12, rate_limit 40".
func labelled(counters map[string]float64, family string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counters)) {
		if label, ok := strings.CutPrefix(k, family+" "); ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", label, counters[k]))
		}
	}
	if len(parts) == 0 {
		return "n/a"
	}
	return strings.Join(parts, ", ")
}

// waitsMetric counts attempts held back for a turn at a receiver, by reason.
const waitsMetric = "webhookd_egress_waits_total"

// scrapeCounters reads webhookd's /metrics; ok is false when it does not answer (webhookd is down)
// or has no process start time.
func scrapeCounters(ctx context.Context, api string) (scrape, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/metrics", nil)
	if err != nil {
		return scrape{}, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return scrape{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, false
	}
	parser := expfmt.NewTextParser(promodel.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil || len(families["process_start_time_seconds"].GetMetric()) == 0 {
		return scrape{}, false
	}
	s := scrape{started: families["process_start_time_seconds"].GetMetric()[0].GetGauge().GetValue(), counters: map[string]float64{}}
	for _, name := range []string{waitsMetric, startsMetric} {
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				s.counters[name+" "+l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return s, true
}

// reportKill prints the verdict, its table last, for bench-kill.sh to keep.
func reportKill(w io.Writer, cfg config, c killCount, errs *publishErrors, recs killRecords, lives *lifeLog) error {
	fmt.Fprintf(w, "\nwebhookd's counters, per process (the first as last scraped before the kill):\n%s", lives)
	fmt.Fprintf(w, "receiver: %d requests answered 503 by design (flaky endpoints' first), %d cut off before the answer\n",
		c.refused, c.cut)
	if c.unmatched > 0 {
		fmt.Fprintf(w, "%d accepted events' 202 named another number of matched webhooks than the account has\n", c.unmatched)
	}
	if c.foreign > 0 {
		fmt.Fprintf(w, "%d Webhook-Ids named none of the scenario's webhooks\n", c.foreign)
	}

	fmt.Fprintf(w, "\nkill -9 under load: 2 accounts x 3 webhooks on one host, %g events/s per account for %s\n", cfg.rate, cfg.duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "accepted events (202)\t%d\n", c.accepted)
	fmt.Fprintf(tw, "expected deliveries\t%d\n", c.expected)
	fmt.Fprintf(tw, "delivered\t%d\n", c.delivered)
	fmt.Fprintf(tw, "missing\t%d\n", len(c.missing))
	fmt.Fprintf(tw, "delivered twice or more\t%d (same Webhook-Id)\n", c.twice)
	fmt.Fprintf(tw, "cut off, then sent again\t%d (the kill closed the request before the answer)\n", c.resent)
	fmt.Fprintf(tw, "arrived without their 202\t%d deliveries of %d events\n", c.unacknowledged, c.unacknowledgedEvents)
	fmt.Fprintf(tw, "publish errors\t%s\n", errs)
	fmt.Fprintf(tw, "webhookd's records\t%s\n", recs)
	if err := tw.Flush(); err != nil {
		return err
	}
	const shown = 100
	for i, id := range c.missing {
		if i == shown {
			fmt.Fprintf(w, "  ... and %d more\n", len(c.missing)-shown)
			break
		}
		rec := "no record"
		if d, ok := recs.state[id]; ok {
			rec = fmt.Sprintf("delivery %d %s after %d attempts", d.ID, d.State, len(d.AttemptLog))
		}
		fmt.Fprintf(w, "  missing %s (webhookd: %s)\n", id, rec)
	}
	return nil
}
