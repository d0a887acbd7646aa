package egress

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// hosts keeps the per-host and per-endpoint state of one Client and decides, for each exchange,
// whether it goes now, waits its turn, or is held back with an appointment.
//
// A host is a receiver's host:port. It has a cap of exchanges in flight, to protect the receiver,
// and a breaker that only evidence about the host itself trips: refused connections, DNS and TLS
// failures, which no path can cause for itself. An endpoint is one webhook's URL. It has a cap of
// its own (a fraction of its host's), an optional rate limit, a window that its 5xx and 429 answers
// narrow and its successes widen again, and a breaker tripped by the failures that hold a slot or
// break a connection: timeouts and resets. So one account's hanging paths on a shared host open
// their own breakers and use their own share of slots, never another's.
//
// No account may hold more than its share of a host's slots, three quarters of the cap: the last
// quarter stays free for the other accounts, so a newcomer finds a slot at once even while one
// account's backlog hangs on the host. When the host is at its cap, the next free slot goes to the
// waiting exchange whose account holds the fewest slots on that host, then whose endpoint holds the
// fewest, then the oldest: an account with one exchange waiting gets the next slot however many
// another has queued.
type hosts struct {
	concurrency         int
	endpointConcurrency int
	breakerFailures     int
	cooldown            time.Duration
	maxWait             time.Duration
	timeout             time.Duration
	now                 func() time.Time
	log                 *slog.Logger
	metrics             *metrics

	mu        sync.Mutex
	byKey     map[string]*host
	endpoints map[string]*endpoint
	seq       uint64
	lastSweep time.Time
}

type host struct {
	key      string
	breaker  breaker
	inFlight int
	// byAccount is how many slots each account holds now; waiters are the exchanges waiting in
	// this process for a slot, in order of arrival.
	byAccount map[int64]int
	waiters   []*waiter
	// estimate is the moving average of an exchange's duration. tails are the latest appointment
	// given to each account's held exchanges, so one account's queue never pushes out another's.
	estimate time.Duration
	measured bool
	tails    map[int64]time.Time
	lastUsed time.Time
}

type endpoint struct {
	key      string
	account  int64
	webhook  int64
	breaker  breaker
	inFlight int
	// window narrows the endpoint's cap while it answers 5xx or 429, as a receiver under load asks:
	// halved by each, widened by one with each success, zero (the cap) once it is back. Attempts
	// it holds back wait; they do not fail.
	window int
	// next is when the rate limit lets the next exchange go (a virtual schedule: each admitted
	// exchange moves it one interval on); tail is the latest appointment given to an exchange the
	// limit or the endpoint's cap held back.
	next     time.Time
	tail     time.Time
	lastUsed time.Time
}

// waiter is an exchange waiting in this process for a slot. granted is set, and ready closed, when
// dispatch gives it one.
type waiter struct {
	account int64
	ep      *endpoint
	cap     int
	seq     uint64
	ready   chan struct{}
	granted bool
}

// ticket is one admitted exchange, handed back to release.
type ticket struct {
	h         *host
	ep        *endpoint
	account   int64
	cap       int // the endpoint's cap for this exchange
	hostProbe bool
	epProbe   bool
	started   time.Time
}

// outcome is what an exchange says about its endpoint and its host.
type outcome int

const (
	// neutral says nothing: our policy blocked it, the caller gave up, or the reply broke a limit
	// of ours.
	neutral outcome = iota
	// answered is an HTTP answer that says the endpoint works: any status but 5xx and 429.
	answered
	// endpointBusy is an answer that says the endpoint is in trouble or overloaded: a 5xx or a
	// 429. It narrows the endpoint's window; being an answer, it does not trip a breaker.
	endpointBusy
	// endpointFailed is a broken connection: reset, or closed without an answer.
	endpointFailed
	// endpointTimedOut is an endpoint failure that held a slot for the whole timeout.
	endpointTimedOut
	// hostFailed is a failure of the host, the same for every path on it: connection refused, a
	// name that does not resolve, a TLS handshake that fails.
	hostFailed
)

const (
	// defaultEstimate stands for an exchange's duration before any has completed.
	defaultEstimate = time.Second
	// estimateWeight is the weight of the latest exchange in the moving average: about the last
	// ten exchanges matter.
	estimateWeight = 0.2
	// idleAfter is how long an unused host or endpoint with a closed breaker is remembered;
	// forgetting it only resets its estimate and its rate schedule.
	idleAfter     = 10 * time.Minute
	sweepInterval = time.Minute
)

func newHosts(o Options, m *metrics) *hosts {
	return &hosts{
		concurrency: o.HostConcurrency, endpointConcurrency: o.EndpointConcurrency, breakerFailures: o.BreakerFailures,
		cooldown: o.BreakerCooldown, maxWait: o.MaxWait, timeout: o.Timeout, now: o.Now, log: o.Logger, metrics: m,
		byKey: make(map[string]*host), endpoints: make(map[string]*endpoint),
	}
}

// acquire admits an exchange with the host named key for the endpoint ep names, waiting up to
// wait in this process for its turn (or up to quick, when that turn is due within it: see
// Request.QuickWait), or refuses it without a connection: with an error wrapping ErrCircuitOpen
// when a breaker is open, or a *HeldError naming what held it and when to come back.
func (hs *hosts) acquire(ctx context.Context, key string, ep Endpoint, wait, quick time.Duration) (ticket, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = hs.now().Add(wait)
		quick = 0 // a wait of its own: QuickWait applies only without one
	}
	limitDeadline := deadline
	if quick > 0 {
		limitDeadline = hs.now().Add(quick) // the rate limit's turn is known: waited for when due within quick
	}
	if err := hs.rateLimit(ctx, key, ep, limitDeadline); err != nil {
		return ticket{}, err
	}

	hs.mu.Lock()
	now := hs.now()
	h, e := hs.lookup(key, ep, now)
	t := ticket{h: h, ep: e, account: ep.Account, cap: hs.endpointCap(ep)}
	var err error
	if t.hostProbe, err = hs.admitBreaker(&h.breaker, scopeHost, h, now); err != nil {
		hs.mu.Unlock()
		return ticket{}, err
	}
	if t.epProbe, err = hs.admitBreaker(&e.breaker, scopeEndpoint, h, now); err != nil {
		hs.giveBackProbes(t, now)
		hs.mu.Unlock()
		return ticket{}, err
	}

	hs.seq++
	w := &waiter{account: ep.Account, ep: e, cap: t.cap, seq: hs.seq, ready: make(chan struct{})}
	h.waiters = append(h.waiters, w)
	hs.dispatch(h, now)
	if w.granted {
		hs.mu.Unlock()
		t.started = now
		return t, nil
	}
	reason := w.heldBy()
	if quick > 0 && hs.due(reason, h, e, now) <= quick {
		deadline = now.Add(quick)
	} else if hs.waitersOf(h, ep.Account) > hs.maxWaiters() {
		deadline = time.Time{}
	}
	if !deadline.After(now) {
		// It may not wait here (a local attempt must not hold its workflow task, unless its turn is
		// due within its quick wait), or its account already has its share of waiters on this
		// host: come back at an appointment.
		held := hs.giveUp(t, w, reason, now, now)
		hs.mu.Unlock()
		return ticket{}, held
	}
	hs.mu.Unlock()

	timer := time.NewTimer(deadline.Sub(now))
	defer timer.Stop()
	var cause error
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
		cause = ctx.Err()
	}

	hs.mu.Lock()
	defer hs.mu.Unlock()
	after := hs.now()
	waited := after.Sub(now)
	if w.granted {
		hs.metrics.held(reason, waited)
		if cause != nil {
			hs.finish(t, neutral, after)
			return ticket{}, cause
		}
		t.started = after
		return t, nil
	}
	held := hs.giveUp(t, w, reason, now, after)
	if cause != nil {
		return ticket{}, cause
	}
	return ticket{}, held
}

// giveUp takes a waiter that got no slot out of line, gives back its probe roles, counts the wait
// it made since (by the reason it was held at first) and books its appointment, by what holds it
// now.
func (hs *hosts) giveUp(t ticket, w *waiter, reason HoldReason, since, now time.Time) *HeldError {
	hs.dropWaiter(t.h, w)
	hs.giveBackProbes(t, now)
	hs.metrics.held(reason, now.Sub(since))
	return hs.hold(w.heldBy(), t.h, t.ep, now)
}

// lookup returns the host and the endpoint of an exchange, creating them on first use. An endpoint
// is its webhook and URL: a webhook whose URL changed starts afresh.
func (hs *hosts) lookup(key string, ep Endpoint, now time.Time) (*host, *endpoint) {
	hs.sweep(now)
	h := hs.byKey[key]
	if h == nil {
		h = &host{key: key, estimate: defaultEstimate, byAccount: make(map[int64]int), tails: make(map[int64]time.Time)}
		hs.byKey[key] = h
	}
	h.lastUsed = now
	e := hs.endpoints[ep.key]
	if e == nil {
		e = &endpoint{key: ep.key, account: ep.Account, webhook: ep.Webhook}
		hs.endpoints[ep.key] = e
	}
	e.lastUsed = now
	return h, e
}

// endpointCap is how many exchanges the endpoint may have in flight: its webhook's own cap or the
// default, never more than the host's.
func (hs *hosts) endpointCap(ep Endpoint) int {
	c := ep.MaxInFlight
	if c <= 0 {
		c = hs.endpointConcurrency
	}
	return min(c, hs.concurrency)
}

// accountShare is how many of a host's slots one account may hold: all but a quarter of the cap,
// which is left for the others. A cap under 4 keeps none back.
func (hs *hosts) accountShare() int { return hs.concurrency - hs.concurrency/4 }

// maxWaiters is how many exchanges of one account may wait in this process for one host: enough
// that a freed slot finds one ready, few enough that a backlog holds few worker slots. The rest
// are held back with appointments.
func (hs *hosts) maxWaiters() int { return max(1, hs.concurrency/4) }

func (hs *hosts) waitersOf(h *host, account int64) int {
	n := 0
	for _, w := range h.waiters {
		if w.account == account {
			n++
		}
	}
	return n
}

// dispatch gives the host's free slots to its waiters: each to the eligible waiter (its endpoint
// below its cap, its account below its share) whose account holds the fewest slots on the host,
// then whose endpoint holds the fewest, then the one that came first.
func (hs *hosts) dispatch(h *host, now time.Time) {
	for h.inFlight < hs.concurrency {
		best := -1
		for i, w := range h.waiters {
			if w.ep.inFlight >= w.ep.capFor(w.cap) || h.byAccount[w.account] >= hs.accountShare() {
				continue
			}
			if best < 0 || fairer(h, w, h.waiters[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := h.waiters[best]
		h.waiters = append(h.waiters[:best], h.waiters[best+1:]...)
		h.inFlight++
		h.byAccount[w.account]++
		w.ep.inFlight++
		h.lastUsed, w.ep.lastUsed = now, now
		w.granted = true
		close(w.ready)
	}
}

func fairer(h *host, a, b *waiter) bool {
	if x, y := h.byAccount[a.account], h.byAccount[b.account]; x != y {
		return x < y
	}
	if a.ep.inFlight != b.ep.inFlight {
		return a.ep.inFlight < b.ep.inFlight
	}
	return a.seq < b.seq
}

func (hs *hosts) dropWaiter(h *host, w *waiter) {
	for i, x := range h.waiters {
		if x == w {
			h.waiters = append(h.waiters[:i], h.waiters[i+1:]...)
			return
		}
	}
}

// heldBy names what keeps a waiter from a slot: its endpoint's cap, or the host's (its account's
// share of the host counts as the host's cap).
func (w *waiter) heldBy() HoldReason {
	if w.ep.inFlight >= w.ep.capFor(w.cap) {
		return HeldByEndpointCap
	}
	return HeldByHostCap
}

// hold refuses an exchange with an appointment. Turns are spaced by how long the host (or, for
// its own cap, the endpoint) takes to free one slot, booked on the account's own line (or the
// endpoint's), so one account's backlog never pushes out another's turns.
func (hs *hosts) hold(reason HoldReason, h *host, e *endpoint, now time.Time) *HeldError {
	tail, spacing := hs.line(reason, h, e)
	retryIn := hs.appointment(&tail, spacing, now)
	if reason == HeldByEndpointCap {
		e.tail = tail
	} else {
		h.tails[e.account] = tail
	}
	return &HeldError{Reason: reason, Host: h.key, RetryIn: retryIn}
}

// line is the line on which hold books a turn for reason: its last booked turn and the spacing of
// its turns.
func (hs *hosts) line(reason HoldReason, h *host, e *endpoint) (tail time.Time, spacing time.Duration) {
	if reason == HeldByEndpointCap {
		return e.tail, h.estimate / time.Duration(max(1, e.inFlight))
	}
	return h.tails[e.account], h.estimate / time.Duration(hs.concurrency)
}

// due is how long until the turn that hold would book now for reason, without booking it.
func (hs *hosts) due(reason HoldReason, h *host, e *endpoint, now time.Time) time.Duration {
	tail, spacing := hs.line(reason, h, e)
	if tail.Before(now) {
		tail = now
	}
	return tail.Add(spacing).Sub(now)
}

// appointment books the next turn on a line whose turns are spacing apart and returns how long
// until it. Jitter stays within a tenth of the spacing so turns keep their order. A turn further
// out than maxWait is spread over the second half of the window without booking, so the line
// stays within reach.
func (hs *hosts) appointment(tail *time.Time, spacing time.Duration, now time.Time) time.Duration {
	at := *tail
	if at.Before(now) {
		at = now
	}
	at = at.Add(spacing)
	wait := at.Sub(now)
	if wait > hs.maxWait {
		return hs.maxWait/2 + rand.N(hs.maxWait/2+1)
	}
	*tail = at
	if spacing >= 10 {
		wait += rand.N(spacing / 10)
	}
	return min(wait, hs.maxWait)
}

// rateLimit holds an exchange until its endpoint's rate limit lets it go: in this process while
// the turn comes before deadline, otherwise with a *HeldError whose appointment is its turn.
func (hs *hosts) rateLimit(ctx context.Context, key string, ep Endpoint, deadline time.Time) error {
	if ep.RateLimit <= 0 {
		return nil
	}
	interval := time.Second / time.Duration(ep.RateLimit)
	hs.mu.Lock()
	now := hs.now()
	h, e := hs.lookup(key, ep, now)
	turn := e.next
	if !turn.After(now) {
		e.next = now.Add(interval)
		hs.mu.Unlock()
		return nil
	}
	if turn.After(deadline) {
		if e.tail.Before(turn) {
			e.tail = turn.Add(-interval)
		}
		held := &HeldError{Reason: HeldByRateLimit, Host: h.key, RetryIn: hs.appointment(&e.tail, interval, now)}
		hs.metrics.held(HeldByRateLimit, 0)
		hs.mu.Unlock()
		return held
	}
	e.next = turn.Add(interval)
	hs.mu.Unlock()

	wait := turn.Sub(now)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		hs.metrics.held(HeldByRateLimit, wait)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release ends an admitted exchange and records what it said about its endpoint and host.
func (hs *hosts) release(ctx context.Context, t ticket, resp *Response, err error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.finish(t, judge(ctx, resp, err), hs.now())
}

// cancel gives back a turn never used.
func (hs *hosts) cancel(t ticket) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.finish(t, neutral, hs.now())
}

func (hs *hosts) finish(t ticket, o outcome, now time.Time) {
	h, e := t.h, t.ep
	h.inFlight--
	if h.byAccount[t.account]--; h.byAccount[t.account] <= 0 {
		delete(h.byAccount, t.account)
	}
	e.inFlight--
	h.lastUsed, e.lastUsed = now, now

	switch o {
	case answered, endpointBusy, endpointFailed, hostFailed:
		h.observe(now.Sub(t.started))
	case endpointTimedOut:
		h.observe(hs.timeout)
	}

	// The host: any exchange that reached it (an answer, or a path that hung) says it is there.
	switch o {
	case answered, endpointBusy, endpointFailed, endpointTimedOut:
		hs.success(&h.breaker, scopeHost, h.key)
	case hostFailed:
		hs.failure(&h.breaker, scopeHost, h.key, t.hostProbe, now)
	default:
		hs.inconclusive(&h.breaker, t.hostProbe, now)
	}
	// The endpoint: only what the endpoint itself did.
	switch o {
	case answered:
		e.widen(t.cap)
		hs.success(&e.breaker, scopeEndpoint, e.name())
	case endpointBusy:
		e.narrow(t.cap)
		hs.success(&e.breaker, scopeEndpoint, e.name())
	case endpointFailed, endpointTimedOut:
		hs.failure(&e.breaker, scopeEndpoint, e.name(), t.epProbe, now)
	default:
		hs.inconclusive(&e.breaker, t.epProbe, now)
	}
	hs.dispatch(h, now)
}

// giveBackProbes returns the probe roles of an exchange that will not be made, so that the next
// one probes.
func (hs *hosts) giveBackProbes(t ticket, now time.Time) {
	if t.hostProbe {
		hs.inconclusive(&t.h.breaker, true, now)
	}
	if t.epProbe {
		hs.inconclusive(&t.ep.breaker, true, now)
	}
}

func (h *host) observe(d time.Duration) {
	if !h.measured {
		h.estimate, h.measured = d, true
		return
	}
	h.estimate = time.Duration(estimateWeight*float64(d) + (1-estimateWeight)*float64(h.estimate))
}

// capFor is the endpoint's cap now: cap, or its window while that is narrower.
func (e *endpoint) capFor(cap int) int {
	if e.window > 0 && e.window < cap {
		return e.window
	}
	return cap
}

// narrow halves the endpoint's window after a 5xx or 429, down to one exchange at a time.
func (e *endpoint) narrow(cap int) { e.window = max(1, e.capFor(cap)/2) }

// widen lets one more exchange in after a success, until the window reaches the cap again.
func (e *endpoint) widen(cap int) {
	if e.window > 0 {
		if e.window++; e.window >= cap {
			e.window = 0
		}
	}
}

func (e *endpoint) name() string { return fmt.Sprintf("webhook %d", e.webhook) }

// sweep forgets hosts and endpoints unused for idleAfter so that the maps do not grow with every
// receiver ever posted to. Those with a breaker not closed, exchanges in flight or waiting, or
// appointments still ahead are kept.
func (hs *hosts) sweep(now time.Time) {
	if now.Sub(hs.lastSweep) < sweepInterval {
		return
	}
	hs.lastSweep = now
	for key, h := range hs.byKey {
		if h.breaker.state == closed && h.inFlight == 0 && len(h.waiters) == 0 && now.Sub(h.lastUsed) > idleAfter && !latest(h.tails).After(now) {
			delete(hs.byKey, key)
		}
	}
	for key, e := range hs.endpoints {
		if e.breaker.state == closed && e.inFlight == 0 && now.Sub(e.lastUsed) > idleAfter && !e.tail.After(now) && !e.next.After(now) {
			delete(hs.endpoints, key)
		}
	}
}

func latest(tails map[int64]time.Time) time.Time {
	var t time.Time
	for _, x := range tails {
		if x.After(t) {
			t = x
		}
	}
	return t
}

// judge reads what an exchange said. ctx is the caller's: when it has ended, the caller gave up,
// which says nothing about the receiver.
func judge(ctx context.Context, resp *Response, err error) outcome {
	if err == nil {
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return endpointBusy
		}
		return answered
	}
	if ctx.Err() != nil {
		return neutral
	}
	switch class, _ := Classify(err); class {
	case ClassTimeout:
		return endpointTimedOut
	case ClassRefused, ClassDNS, ClassTLS:
		return hostFailed
	case ClassNetwork:
		return endpointFailed
	}
	return neutral
}
