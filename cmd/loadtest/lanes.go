package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The lanes scenario (issue 43): ordered lanes per key under chaos, and what they cost. Its
// phases, in this order, so that the CPU readings of the first run on the processes given
// (-pid, -temporal-pid), before any is killed:
//
//  1. throughput: webhookd's unordered tier (c) (the tiers scenario's), then the same closed-loop
//     publishing to a webhook ordered by data.id with the events spread over -keys keys (at least
//     100 for the acceptance figure), each with deliveries/s and the CPU time per delivery;
//  2. stuck: open loop at -lane-rate events/s for -duration over -keys keys (100 at most, so that
//     the stuck key has events waiting) to an ordered webhook, first with every key answered 2xx
//     (calm), then again, to a new webhook, with the first key's every request answered 503 (its
//     head runs out of its schedule and blocks its lane): the other keys' p50, p99 and max
//     event-to-receipt in each, -lane-pairs times, and the median of the pairs' p99 ratios (this
//     machine's load moves within seconds: one pair can be a lucky or an unlucky one). The rate must
//     stay below the ordered throughput, or both phases measure a queue;
//  3. chaos: -events events over -keys keys (each key's events published one after another: round
//     r publishes every key's event r), the receiver answering 503 to -lane-fail of the requests at
//     random. When a third of the events were accepted it prints "lanes: kill webhookd", at two
//     thirds "lanes: kill temporal", for bench-e2e.sh to send SIGKILL to that process and start it
//     again on the same data (with -kill-ack-dir, it waits for the file of that name there before
//     it goes on). Every publish is made again with the same Idempotency-Key until it is answered
//     202. It then waits for every event to be answered 2xx and reads the receiver's log: an order
//     violation is a request of a key's event n+1 that arrived before event n was answered 2xx, a
//     request of event n after one of event n+1 that is not a resend, or a webhook-sequence that
//     does not grow with the events; a lost event is one accepted and never answered 2xx.
//
// It prints one table and exits 1 on an order violation or a lost event.

// lanesConfig is the lanes scenario's own flags.
type lanesConfig struct {
	keys       int
	pairs      int
	rate       float64
	failRate   float64
	killAckDir string
}

// laneRequest is one request a lanes receiver got: the key and the key's event number (from the
// body's data.name), the event (webhook-id), the lanes' headers, when it arrived and when it was
// answered, and how.
type laneRequest struct {
	key, idx   int
	event      int64
	seq        int64
	resend     bool
	at, answer time.Time
	status     int
}

// laneReceiver answers a share of requests 503 at random (seeded), and every request of the stuck
// key, and logs every request.
type laneReceiver struct {
	mu       sync.Mutex
	rand     *rand.Rand
	failRate float64
	stuck    int // -1: none
	reqs     []laneRequest
	// ok holds the events answered 2xx, by key and number; okCount counts them.
	ok      map[[2]int]time.Time
	okCount atomic.Int64
	// firstOK is when each event (by id) was first answered 2xx: its receipt.
	firstOK map[int64]time.Time
	bad     []string
}

func newLaneReceiver(failRate float64, stuck int, seed uint64) *laneReceiver {
	return &laneReceiver{rand: rand.New(rand.NewPCG(seed, 43)), failRate: failRate, stuck: stuck,
		ok: map[[2]int]time.Time{}, firstOK: map[int64]time.Time{}}
}

// laneEventName is data.name of key k's event i: the receiver reads both back from it.
func laneEventName(k, i int) string { return fmt.Sprintf("k%d-e%d", k, i) }

func (l *laneReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := laneRequest{at: time.Now(), status: http.StatusOK}
	body, _ := io.ReadAll(r.Body)
	var parsed struct {
		Data struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &parsed)
	_, nameErr := fmt.Sscanf(parsed.Data.Name, "k%d-e%d", &e.key, &e.idx)
	var hook int64
	_, idErr := fmt.Sscanf(strings.ReplaceAll(r.Header.Get("Webhook-Id"), "_", " "), "msg %d %d", &e.event, &hook)
	seq, seqErr := strconv.ParseInt(r.Header.Get("Webhook-Sequence"), 10, 64)
	e.seq, e.resend = seq, r.Header.Get("Webhook-Resend") == "true"
	l.mu.Lock()
	defer l.mu.Unlock()
	if nameErr != nil || idErr != nil {
		l.bad = append(l.bad, fmt.Sprintf("a request that names no event of the scenario: %.100s", body))
		return
	}
	if seqErr != nil || seq < 1 {
		l.bad = append(l.bad, fmt.Sprintf("%s came with webhook-sequence %q", parsed.Data.Name, r.Header.Get("Webhook-Sequence")))
	}
	if e.key == l.stuck || l.rand.Float64() < l.failRate {
		e.status = http.StatusServiceUnavailable
	}
	w.WriteHeader(e.status)
	e.answer = time.Now()
	l.reqs = append(l.reqs, e)
	if e.status == http.StatusOK {
		if _, seen := l.ok[[2]int{e.key, e.idx}]; !seen {
			l.ok[[2]int{e.key, e.idx}] = e.answer
			l.firstOK[e.event] = e.at
			l.okCount.Add(1)
		}
	}
}

// log returns the requests in the order they arrived.
func (l *laneReceiver) log() []laneRequest {
	l.mu.Lock()
	out := slices.Clone(l.reqs)
	l.mu.Unlock()
	slices.SortStableFunc(out, func(a, b laneRequest) int { return a.at.Compare(b.at) })
	return out
}

// receipt is when the event was first answered 2xx.
func (l *laneReceiver) receipt(event int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.firstOK[event]
	return at, ok
}

// orderReport is what the receiver's log says of the order within each key.
type orderReport struct {
	requests, failed int
	violations       []string
	// duplicates counts the events answered 2xx more than once.
	duplicates int
}

// checkLaneOrder reads log (in arrival order) key by key: see the scenario's description.
func checkLaneOrder(log []laneRequest) orderReport {
	var r orderReport
	byKey := map[int][]laneRequest{}
	for _, e := range log {
		byKey[e.key] = append(byKey[e.key], e)
	}
	for k, reqs := range byKey {
		first, firstOK, seq, oks := map[int]time.Time{}, map[int]time.Time{}, map[int]int64{}, map[int]int{}
		maxIdx := 0
		for _, e := range reqs {
			r.requests++
			if e.status != http.StatusOK {
				r.failed++
			} else if oks[e.idx]++; oks[e.idx] == 1 {
				firstOK[e.idx] = e.answer
			}
			if _, ok := first[e.idx]; !ok {
				first[e.idx] = e.at
			}
			if s, ok := seq[e.idx]; !ok {
				seq[e.idx] = e.seq
			} else if s != e.seq {
				r.violations = append(r.violations, fmt.Sprintf("key %d event %d came with webhook-sequence %d and %d", k, e.idx, s, e.seq))
			}
			if _, later := first[e.idx+1]; later && !e.resend {
				r.violations = append(r.violations, fmt.Sprintf("key %d: a request of event %d after event %d's first", k, e.idx, e.idx+1))
			}
			maxIdx = max(maxIdx, e.idx)
		}
		for i := 1; i <= maxIdx; i++ {
			at, ok := first[i]
			if !ok {
				continue
			}
			if prev, ok := firstOK[i-1]; !ok || at.Before(prev) {
				r.violations = append(r.violations, fmt.Sprintf("key %d: event %d's first request before event %d was answered 2xx", k, i, i-1))
			}
			if s, ok := seq[i-1]; ok && seq[i] <= s {
				r.violations = append(r.violations, fmt.Sprintf("key %d: event %d came with webhook-sequence %d, event %d with %d", k, i, seq[i], i-1, s))
			}
		}
		for _, n := range oks {
			if n > 1 {
				r.duplicates++
			}
		}
	}
	return r
}

// publishKeyed publishes campaign.created with data, again with the same Idempotency-Key until
// it is answered 202 or ctx ends: a publish cut by a kill may have been committed.
func publishKeyed(ctx context.Context, c *apiClient, data map[string]any, idemKey string) (int64, error) {
	for {
		id, err := publishOnce(ctx, c, data, idemKey)
		if err == nil {
			return id, nil
		}
		var se *statusError
		if errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests {
			return 0, err // refused: trying again changes nothing
		}
		select {
		case <-ctx.Done():
			return 0, errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func publishOnce(ctx context.Context, c *apiClient, data map[string]any, idemKey string) (int64, error) {
	req, err := c.request(ctx, http.MethodPost, "/api/svc/v2/events", map[string]any{"eventType": "campaign.created", "data": data})
	if err != nil {
		return 0, err
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusAccepted {
		return 0, &statusError{method: http.MethodPost, path: "/api/svc/v2/events", status: resp.StatusCode, body: string(raw[:min(len(raw), 300)])}
	}
	var out struct {
		Data published `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Data.ID == 0 {
		return 0, fmt.Errorf("POST /api/svc/v2/events: 202 with %.100s", raw)
	}
	return out.Data.ID, nil
}

// laneData is the data of key k's event i: campaign k.
func laneData(k, i int) map[string]any {
	d := campaignData(laneEventName(k, i))
	d["id"] = k + 1
	return d
}

// registerOrdered registers a campaign.created webhook ordered by data.id.
func registerOrdered(ctx context.Context, c *apiClient, url string) (int64, error) {
	return c.registerWebhook(ctx, map[string]any{"url": url, "eventType": "campaign.created", "ordering": map[string]string{"key": "data.id"}})
}

// lanesResult is every figure of the scenario.
type lanesResult struct {
	unordered, ordered tierResult
	// calm and stuck are the pairs of stuck phases, in the order they ran.
	calm, stuck    []summary
	chaos          orderReport
	chaosEvents    int
	lost           int
	receiverIssues []string
}

func lanesScenario(ctx context.Context, cfg config, cert tls.Certificate) error {
	events, keys := orDefault(cfg.events, 10000), cfg.lanes.keys
	if keys < 1 || events < keys {
		return fmt.Errorf("-keys %d, -events %d: want at least one key, and at least as many events as keys", keys, events)
	}
	if keys < 100 {
		fmt.Printf("lanes: -keys %d: the ordered throughput with fewer than 100 active keys is not the acceptance figure\n", keys)
	}
	client := newAPIClient(cfg.api, cfg.key, max(64, cfg.concurrency))
	var res lanesResult
	var err error

	// 1. Throughput, while the processes given are the ones that started.
	tput := max(1000, events/5)
	procs := cpuProcesses(cfg)
	withCPU := func(measure func() (tierResult, error)) (tierResult, error) {
		before := readCPU(procs)
		r, err := measure()
		r.cpu = cpuPerDelivery(procs, before, readCPU(procs), r.n)
		return r, err
	}
	tcfg := cfg
	tcfg.events = tput
	fmt.Printf("lanes: throughput, %d deliveries each, %d concurrent clients: unordered (c), then ordered over %d keys\n", tput, cfg.concurrency, keys)
	if res.unordered, err = withCPU(func() (tierResult, error) {
		t, err := measureThroughput(ctx, tcfg, cert, "(c) unordered")
		return tierResult{name: "(c) webhookd, unordered", n: tput, elapsed: t.total}, err
	}); err != nil {
		return fmt.Errorf("(c) unordered: %w", err)
	}
	if res.ordered, err = withCPU(func() (tierResult, error) { return orderedThroughput(ctx, tcfg, cert, client, keys) }); err != nil {
		return fmt.Errorf("ordered throughput: %w", err)
	}

	// 2. The other keys' latency, without then with a stuck key.
	for range cfg.lanes.pairs {
		calm, err := stuckPhase(ctx, cfg, cert, client, min(keys, 100), false)
		if err != nil {
			return err
		}
		stuck, err := stuckPhase(ctx, cfg, cert, client, min(keys, 100), true)
		if err != nil {
			return err
		}
		res.calm, res.stuck = append(res.calm, calm), append(res.stuck, stuck)
	}

	// 3. Chaos.
	if err := chaosPhase(ctx, cfg, cert, client, events, keys, &res); err != nil {
		return err
	}
	printLanes(cfg, events, keys, res)
	if len(res.chaos.violations) > 0 || res.lost > 0 {
		return fmt.Errorf("%d order violations, %d lost events", len(res.chaos.violations), res.lost)
	}
	return nil
}

// orderedThroughput is the throughput scenario's closed-loop publishing to an ordered webhook, the
// events spread over keys keys (event i is key i mod keys).
func orderedThroughput(ctx context.Context, cfg config, cert tls.Certificate, client *apiClient, keys int) (tierResult, error) {
	name := fmt.Sprintf("ordered over %d keys", keys)
	counter := newDeliveryCounter(int64(cfg.events))
	addr, stop, err := serveTLS(cfg.listen, cert, counter)
	if err != nil {
		return tierResult{}, err
	}
	defer stop()
	hook, err := registerOrdered(ctx, client, "https://"+addr+"/ordered")
	if err != nil {
		return tierResult{}, err
	}
	defer deleteWebhooks(ctx, client, []int64{hook})
	start := time.Now()
	var accepted atomic.Int64
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  %s: %d of %d events accepted, %d delivered\n", name, accepted.Load(), cfg.events, counter.received.Load())
	})
	err = fanOut(cfg.events, cfg.concurrency, func(i int) error {
		_, err := client.publishEvent(ctx, "campaign.created", laneData(i%keys, i/keys))
		accepted.Add(1)
		return err
	})
	stopProgress()
	if err != nil {
		return tierResult{}, err
	}
	if err := awaitCounter(ctx, counter, cfg, name); err != nil {
		return tierResult{}, err
	}
	return tierResult{name: "webhookd, " + name, n: cfg.events, elapsed: counter.lastArrival().Sub(start)}, nil
}

// stuckPhase publishes open loop at -lane-rate for -duration over keys keys to a new ordered
// webhook, key 0 stuck when stuck is set, and returns the other keys' event-to-receipt times.
func stuckPhase(ctx context.Context, cfg config, cert tls.Certificate, client *apiClient, keys int, stuck bool) (summary, error) {
	name, stuckKey := "calm", -1
	if stuck {
		name, stuckKey = "one key stuck", 0
	}
	rc := newLaneReceiver(0, stuckKey, 1)
	addr, stop, err := serveTLS(cfg.listen, cert, rc)
	if err != nil {
		return summary{}, err
	}
	defer stop()
	hook, err := registerOrdered(ctx, client, "https://"+addr+"/"+strings.ReplaceAll(name, " ", "-"))
	if err != nil {
		return summary{}, err
	}
	defer deleteWebhooks(ctx, client, []int64{hook})
	n := int(cfg.lanes.rate * cfg.duration.Seconds())
	fmt.Printf("lanes: %s, %d events at %g/s over %d keys to webhook %d\n", name, n, cfg.lanes.rate, keys, hook)
	var (
		mu     sync.Mutex
		pubs   []publication // the other keys' events
		failed error
	)
	interval := time.Duration(float64(time.Second) / cfg.lanes.rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		k := i % keys
		wg.Go(func() {
			sent := time.Now()
			id, err := publishOnce(ctx, client, laneData(k, i/keys), "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = err
			case k != stuckKey:
				pubs = append(pubs, publication{eventID: id, start: sent})
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return summary{}, fmt.Errorf("%s: publish: %w", name, failed)
	}
	arrived := func() int {
		c := 0
		for _, p := range pubs {
			if _, ok := rc.receipt(p.eventID); ok {
				c++
			}
		}
		return c
	}
	pollUntil(ctx, time.Now().Add(cfg.timeout), cfg.progress, func() bool { return arrived() == len(pubs) },
		func() { fmt.Printf("  %s: %d of the other keys' %d events received\n", name, arrived(), len(pubs)) })
	now := time.Now()
	out := make([]obs, 0, len(pubs))
	for _, p := range pubs {
		if at, ok := rc.receipt(p.eventID); ok {
			out = append(out, obs{d: at.Sub(p.start)})
		} else {
			out = append(out, obs{d: now.Sub(p.start), lowerBound: true})
		}
	}
	if r := checkLaneOrder(rc.log()); len(r.violations) > 0 {
		return summary{}, fmt.Errorf("%s: %d order violations, e.g. %s", name, len(r.violations), r.violations[0])
	}
	s := summarize(out)
	fmt.Printf("  %s: the other keys' event-to-receipt p50 %s, p99 %s, max %s\n", name, s.p50, s.p99, s.max)
	return s, nil
}

// chaosPhase is the scenario's third phase.
func chaosPhase(ctx context.Context, cfg config, cert tls.Certificate, client *apiClient, events, keys int, res *lanesResult) error {
	rc := newLaneReceiver(cfg.lanes.failRate, -1, 2)
	addr, stop, err := serveTLS(cfg.listen, cert, rc)
	if err != nil {
		return err
	}
	defer stop()
	hook, err := registerOrdered(ctx, client, "https://"+addr+"/chaos")
	if err != nil {
		return err
	}
	defer deleteWebhooks(ctx, client, []int64{hook})
	rounds := (events + keys - 1) / keys
	run := time.Now().UnixNano()
	fmt.Printf("lanes: chaos, %d events over %d keys (%d rounds) to webhook %d, %.0f%% answered 503\n", events, keys, rounds, hook, cfg.lanes.failRate*100)
	var accepted atomic.Int64
	pubCtx, cancel := context.WithTimeout(ctx, cfg.timeout+10*time.Minute)
	defer cancel()
	published := make(chan error, 1)
	go func() {
		for r := range rounds {
			n := min(keys, events-r*keys)
			err := fanOut(n, cfg.concurrency, func(k int) error {
				_, err := publishKeyed(pubCtx, client, laneData(k, r), fmt.Sprintf("lanes-%d-%d-%d", run, k, r))
				accepted.Add(1)
				return err
			})
			if err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  chaos: %d of %d events accepted, %d answered 2xx\n", accepted.Load(), events, rc.okCount.Load())
	})
	defer stopProgress()
	for i, target := range []string{"webhookd", "temporal"} {
		for accepted.Load() < int64(events*(i+1)/3) {
			select {
			case err := <-published:
				published <- err
				if err != nil {
					return fmt.Errorf("chaos: publish: %w", err)
				}
			case <-time.After(5 * time.Millisecond):
			}
		}
		fmt.Printf("lanes: kill %s (%d of %d events accepted)\n", target, accepted.Load(), events)
		if err := awaitAck(ctx, cfg.lanes.killAckDir, target); err != nil {
			return err
		}
	}
	if err := <-published; err != nil {
		return fmt.Errorf("chaos: publish: %w", err)
	}
	fmt.Printf("lanes: chaos, every event accepted; waiting for each to be answered 2xx\n")
	// Deliveries may trail the publishing by minutes (a lane makes one at a time): the wait ends
	// when every event was answered 2xx, or when none was for -timeout.
	for last := int64(-1); rc.okCount.Load() != last && rc.okCount.Load() < int64(events); {
		last = rc.okCount.Load()
		pollUntil(ctx, time.Now().Add(cfg.timeout), cfg.progress, func() bool { return rc.okCount.Load() != last }, func() {})
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	stopProgress()
	res.chaos, res.chaosEvents = checkLaneOrder(rc.log()), events
	res.lost = events - int(rc.okCount.Load())
	rc.mu.Lock()
	res.receiverIssues = slices.Clone(rc.bad)
	rc.mu.Unlock()
	return nil
}

// awaitAck waits for bench-e2e.sh to say that target was killed and started again: a file of that
// name in dir. Without dir, nothing waits (the kill is the caller's to make, or none).
func awaitAck(ctx context.Context, dir, target string) error {
	if dir == "" {
		return nil
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, target)); err == nil {
			fmt.Printf("lanes: %s started again\n", target)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not started again within 3 minutes (no %s)", target, filepath.Join(dir, target))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func printLanes(cfg config, events, keys int, r lanesResult) {
	fmt.Println()
	fmt.Printf("| lanes: %d events over %d keys | figure |\n|---|---|\n", events, keys)
	fmt.Printf("| chaos: order violations | %d |\n", len(r.chaos.violations))
	fmt.Printf("| chaos: lost events (accepted, never answered 2xx) | %d of %d |\n", r.lost, r.chaosEvents)
	fmt.Printf("| chaos: requests, answered 503 | %d, %d |\n", r.chaos.requests, r.chaos.failed)
	fmt.Printf("| chaos: events answered 2xx twice or more (at least once) | %d |\n", r.chaos.duplicates)
	var ratios []float64
	for i := range r.calm {
		fmt.Printf("| pair %d: other keys' event-to-receipt p50 / p99 / max, no key stuck (%g events/s over %d keys) | %s / %s / %s |\n",
			i+1, cfg.lanes.rate, min(keys, 100), r.calm[i].p50, r.calm[i].p99, r.calm[i].max)
		fmt.Printf("| pair %d: the same, one key stuck | %s / %s / %s |\n", i+1, r.stuck[i].p50, r.stuck[i].p99, r.stuck[i].max)
		ratios = append(ratios, float64(r.stuck[i].p99.d)/float64(r.calm[i].p99.d))
	}
	fmt.Printf("| p99 one key stuck / p99 none, by pair; median | %s; %.2f |\n", formatRatios(ratios), median(ratios))
	for _, t := range []tierResult{r.unordered, r.ordered} {
		fmt.Printf("| %s: deliveries/s (CPU ms per delivery) | %.0f (%s) |\n", t.name, t.rate(), t.cpu)
	}
	fmt.Printf("| ordered / unordered (c) | %.2f |\n", r.ordered.rate()/r.unordered.rate())
	for _, v := range r.chaos.violations[:min(len(r.chaos.violations), 10)] {
		fmt.Println("violation:", v)
	}
	for _, b := range r.receiverIssues[:min(len(r.receiverIssues), 10)] {
		fmt.Println("receiver:", b)
	}
}
