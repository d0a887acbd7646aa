package egress

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
)

// hosts keeps the per-host and per-endpoint state of one Client and decides, for each exchange,
// whether it goes now, waits its turn, or is held back with an appointment.
//
// A host is a receiver's host:port. It has a cap of exchanges in flight, to protect the receiver,
// and a breaker that only evidence about the host itself trips: refused connections and DNS
// failures, which no path and no webhook's settings can cause for itself (a TLS handshake can fail
// for one webhook's certificate or trust and not another's, so it is the endpoint's). An endpoint is one webhook's URL. It has a cap of
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
	// booked holds the turns booked for held exchanges, by their Request.Key, until they come back
	// and redeem them.
	booked    map[string]*booking
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
	// estimate is the moving average of an exchange's duration. lines are each account's line of
	// appointments for the host's slots, so one account's queue never pushes out another's.
	estimate time.Duration
	measured bool
	lines    map[int64]*line
	lastUsed time.Time
}

// line is a line of appointments for slots: the last turn booked on it, and the moving average of
// the duration of the exchanges it is for (an account's on a host, which may differ from the
// host's: one account's paths hang while another's answer at once).
type line struct {
	tail     time.Time
	estimate time.Duration
	measured bool
}

// booking is what an exchange held back has booked, kept under its Request.Key until it asks
// again: its turn under the endpoint's rate limit, and its appointment for a slot on the line
// reason names, with its place in that line. Coming back, it redeems them instead of booking
// anew, so each held exchange takes one turn, and it keeps its place among the waiters.
type booking struct {
	ep       *endpoint
	h        *host     // the host whose slot it waits for
	rateTurn time.Time // zero: none booked
	slotTurn time.Time // zero: none booked
	reason   HoldReason
	seq      uint64
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
	// rate is the rate limit in force (exchanges per second; zero: none), and next the next turn
	// free under it: a virtual schedule, each turn booked moves it one interval on. retimed is
	// closed, and replaced, when a new limit moves the turns already booked.
	rate    int
	next    time.Time
	last    time.Time // the turn of the last exchange the limit let go
	retimed chan struct{}
	// checking: one of its waiters is reading its limit anew (Endpoint.RecheckRateLimit), the
	// last read having begun at checkedAt (the process's clock: it paces reads of the database,
	// not turns).
	checking  bool
	checkedAt time.Time
	// tail is the latest appointment given to an exchange the endpoint's cap held back.
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
	// neutral says nothing: our policy blocked it, the caller gave up, the reply broke a limit of
	// ours, or our egress proxy failed (even when it says it could not reach the receiver: its
	// word cannot tell its own outbound trouble from the receiver's).
	neutral outcome = iota
	// answered is an HTTP answer that says the endpoint works: any status but 5xx and 429.
	answered
	// endpointBusy is an answer that says the endpoint is in trouble or overloaded: a 5xx or a
	// 429. It narrows the endpoint's window; being an answer, it does not trip a breaker.
	endpointBusy
	// endpointFailed is a broken connection (reset, or closed without an answer) or a TLS handshake
	// that failed: what the endpoint's webhook presents and trusts decides the handshake.
	endpointFailed
	// endpointTimedOut is an endpoint failure that held a slot for the whole timeout.
	endpointTimedOut
	// hostFailed is a failure of the host, the same for every path and every webhook's settings
	// on it: connection refused, a name that does not resolve.
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
	// rateLead is how much sooner than its turn under a rate limit an exchange held back comes
	// back, to wait for the turn here: a workflow's timer and the tasks that follow it take from
	// tens of milliseconds to a second, which at 50 turns a second would leave gaps.
	rateLead = time.Second
	// rateRecheck is how often the exchanges waiting here for a turn under an endpoint's rate
	// limit read the limit anew (one of them at a time), and how long at most each sleeps.
	rateRecheck = time.Second
)

func newHosts(o Options, m *metrics) *hosts {
	return &hosts{
		concurrency: o.HostConcurrency, endpointConcurrency: o.EndpointConcurrency, breakerFailures: o.BreakerFailures,
		cooldown: o.BreakerCooldown, maxWait: o.MaxWait, timeout: o.Timeout, now: o.Now, log: o.Logger, metrics: m,
		byKey: make(map[string]*host), endpoints: make(map[string]*endpoint), booked: make(map[string]*booking),
	}
}

// acquire admits an exchange with the host named key for the endpoint ep names, waiting up to
// wait in this process for its turn (or up to quick, when that turn is due within it: see
// Request.QuickWait), or refuses it without a connection: with an error wrapping ErrCircuitOpen
// when a breaker is open, or a *HeldError naming what held it and when its booked turn comes.
// name is the exchange's Request.Key: asked again under it, an exchange held back redeems what it
// booked instead of booking anew.
func (hs *hosts) acquire(ctx context.Context, key string, ep Endpoint, wait, quick time.Duration, name string) (ticket, error) {
	var deadline time.Time
	if wait > 0 {
		deadline = hs.now().Add(wait)
		quick = 0 // a wait of its own: QuickWait applies only without one
	}
	limitDeadline := deadline
	if quick > 0 {
		limitDeadline = hs.now().Add(quick) // the rate limit's turn is known: waited for when due within quick
	}
	if err := hs.rateLimit(ctx, key, ep, name, limitDeadline); err != nil {
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
	b := hs.booked[name]
	back := b != nil && b.ep == e && !b.slotTurn.IsZero()
	if back {
		w.seq = b.seq // back for its appointment: its place in line is kept
	}
	h.waiters = append(h.waiters, w)
	hs.dispatch(h, now)
	if w.granted {
		delete(hs.booked, name)
		hs.mu.Unlock()
		t.started = now
		return t, nil
	}
	reason := w.heldBy()
	switch {
	case back:
		// Its turn was booked for it, so it waits in line past its account's share of waiters,
		// unless it came back sooner than its wait reaches: then it sleeps on until its appointment.
		if wait <= 0 || b.slotTurn.Sub(now) > wait {
			deadline = time.Time{}
		}
	case quick > 0 && hs.due(reason, h, e, now) <= quick:
		deadline = now.Add(quick)
	case hs.waitersOf(h, ep.Account) > hs.maxWaiters():
		deadline = time.Time{}
	}
	if !deadline.After(now) {
		// It may not wait here (a local attempt must not hold its workflow task, unless its turn is
		// due within its quick wait), or its account already has its share of waiters on this
		// host: come back at an appointment.
		held := hs.giveUp(t, w, reason, name, now, now)
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
		delete(hs.booked, name)
		hs.metrics.held(reason, waited)
		if cause != nil {
			hs.finish(t, neutral, after)
			return ticket{}, cause
		}
		t.started = after
		return t, nil
	}
	held := hs.giveUp(t, w, reason, name, now, after)
	if cause != nil {
		return ticket{}, cause
	}
	return ticket{}, held
}

// giveUp takes a waiter that got no slot out of line, gives back its probe roles and counts the
// wait it made since (by the reason it was held at first). An exchange whose appointment is still
// ahead comes back then; any other books one, by what holds it now.
func (hs *hosts) giveUp(t ticket, w *waiter, reason HoldReason, name string, since, now time.Time) *HeldError {
	hs.dropWaiter(t.h, w)
	hs.giveBackProbes(t, now)
	hs.metrics.held(reason, now.Sub(since))
	if b := hs.booked[name]; b != nil && b.ep == t.ep && b.slotTurn.After(now) {
		return &HeldError{Reason: b.reason, Host: t.h.key, RetryIn: b.slotTurn.Sub(now)}
	}
	return hs.hold(w.heldBy(), t.h, t.ep, name, now)
}

// bookingOf returns what the exchange named name has booked at endpoint e, an empty booking if
// nothing (or, for a webhook whose URL changed, at another endpoint). An exchange without a name
// gets a booking nobody keeps: it cannot come back for it.
func (hs *hosts) bookingOf(name string, e *endpoint) *booking {
	if name == "" {
		return &booking{ep: e}
	}
	b := hs.booked[name]
	if b == nil || b.ep != e {
		b = &booking{ep: e}
		hs.booked[name] = b
	}
	return b
}

// lookup returns the host and the endpoint of an exchange, creating them on first use. An endpoint
// is its webhook and URL: a webhook whose URL changed starts afresh.
func (hs *hosts) lookup(key string, ep Endpoint, now time.Time) (*host, *endpoint) {
	hs.sweep(now)
	h := hs.byKey[key]
	if h == nil {
		h = &host{key: key, estimate: defaultEstimate, byAccount: make(map[int64]int), lines: make(map[int64]*line)}
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

// hold refuses an exchange with an appointment, booked for it under name. Turns are spaced by how
// long the host takes to free a slot for the exchange's account (or, for the endpoint's own cap,
// for the endpoint), on the account's own line (or the endpoint's), so one account's backlog never
// pushes out another's turns. The appointment is the turn itself, however far out: the exchange
// comes back once, when a slot can be its.
func (hs *hosts) hold(reason HoldReason, h *host, e *endpoint, name string, now time.Time) *HeldError {
	tail, spacing := hs.line(reason, h, e)
	at := later(*tail, now).Add(spacing)
	*tail = at
	b := hs.bookingOf(name, e)
	hs.seq++
	b.h, b.slotTurn, b.reason, b.seq = h, at, reason, hs.seq
	return &HeldError{Reason: reason, Host: h.key, RetryIn: at.Sub(now)}
}

// respace books the turns still ahead on an account's line for a host's slots again, in their
// order, at the spacing its estimate gives now. Its first turns are booked while nothing of the
// account has finished on the host yet, on a guess: 1,000 attempts to paths that hang were given
// turns five times too close, came back too early, waited their whole wait in vain and booked
// again, over and over. Respaced, one that comes back before its turn sleeps on until it, once.
func (hs *hosts) respace(h *host, account int64, now time.Time) {
	var ahead []*booking
	for _, b := range hs.booked {
		if b.h == h && b.ep.account == account && b.reason == HeldByHostCap && b.slotTurn.After(now) {
			ahead = append(ahead, b)
		}
	}
	if len(ahead) == 0 {
		return
	}
	slices.SortFunc(ahead, func(x, y *booking) int { return x.slotTurn.Compare(y.slotTurn) })
	tail, spacing := hs.line(HeldByHostCap, h, ahead[0].ep)
	at := now
	for _, b := range ahead {
		at = at.Add(spacing)
		b.slotTurn = at
	}
	*tail = at
}

// line is the line on which hold books a turn for reason, its last booked turn, and the spacing
// of its turns: how long the host takes to free a slot that can be the exchange's. For the
// endpoint's cap, that is one of the endpoint's own; for an account holding its whole share of the
// host, one of the account's own, so its line is spaced by its own exchanges' duration (its paths
// may hang while others' answer at once); otherwise any of the host's.
func (hs *hosts) line(reason HoldReason, h *host, e *endpoint) (tail *time.Time, spacing time.Duration) {
	l := h.lineOf(e.account)
	if reason == HeldByEndpointCap {
		return &e.tail, l.estimate / time.Duration(max(1, e.inFlight))
	}
	if n := h.byAccount[e.account]; n >= hs.accountShare() {
		return &l.tail, l.estimate / time.Duration(n)
	}
	return &l.tail, h.estimate / time.Duration(hs.concurrency)
}

// due is how long until the turn that hold would book now for reason, without booking it.
func (hs *hosts) due(reason HoldReason, h *host, e *endpoint, now time.Time) time.Duration {
	tail, spacing := hs.line(reason, h, e)
	return later(*tail, now).Add(spacing).Sub(now)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rateLimit holds an exchange until its endpoint's rate limit lets it go: in this process while
// the turn comes before deadline, otherwise with a *HeldError whose appointment is its turn, less
// what it may wait here when it comes back (up to rateLead), so that a late wake-up does not cost
// the endpoint its pace. The turn is booked under name: held back and asked again, the exchange
// redeems it, so each exchange takes one turn and the endpoint gets its limit.
func (hs *hosts) rateLimit(ctx context.Context, key string, ep Endpoint, name string, deadline time.Time) error {
	if ep.RateLimit <= 0 {
		// No limit, or one removed: removed, the exchanges held under it ask without one when they
		// come back (the API's limits signal brings them back at once).
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := hs.now()
	h, e := hs.lookup(key, ep, now)
	hs.setRate(e, ep.RateLimit, now)
	b := hs.bookingOf(name, e)
	if b.rateTurn.IsZero() || b.rateTurn.Before(now.Add(-e.interval())) {
		// Nothing booked, or a turn so long gone that taking it now would break the limit.
		b.rateTurn = later(e.next, now)
		e.next = b.rateTurn.Add(e.interval())
	}
	start, waited := now, false
	for {
		turn := b.rateTurn
		if !turn.After(now) {
			e.last = later(e.last, turn)
			if waited {
				hs.metrics.held(HeldByRateLimit, now.Sub(start))
			}
			return nil
		}
		if turn.After(deadline) {
			hs.metrics.held(HeldByRateLimit, now.Sub(start))
			early := min(rateLead, max(0, deadline.Sub(now))/2)
			return &HeldError{Reason: HeldByRateLimit, Host: h.key, RetryIn: turn.Sub(now) - early}
		}
		waited = true
		// Every waiter whose turn is further out than rateRecheck wakes at least that often, and
		// the first to wake after rateRecheck reads the limit anew (one read at a time, at most one
		// per rateRecheck for the endpoint), so that a change reaches the exchanges waiting here
		// within about that, whichever of them are still here (those held back hear of it from
		// their workflow's limits signal). Issue 41: only the first waiter to sleep read it, and
		// once its turn came the others slept on to theirs under the old limit.
		sleep := turn.Sub(now)
		recheck := ep.RecheckRateLimit != nil && sleep > rateRecheck
		if recheck {
			sleep = rateRecheck
		}
		retimed := e.retimed
		hs.mu.Unlock()
		timer := time.NewTimer(sleep)
		var err error
		fired := false
		select {
		case <-timer.C:
			fired = true
		case <-retimed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		timer.Stop()
		check := false
		if recheck && err == nil {
			hs.mu.Lock()
			if check = !e.checking && time.Since(e.checkedAt) >= rateRecheck; check {
				e.checking, e.checkedAt = true, time.Now()
			}
			hs.mu.Unlock()
		}
		rate, recheckErr := 0, error(nil)
		if check {
			rate, recheckErr = ep.RecheckRateLimit(ctx)
		}
		hs.mu.Lock()
		if check {
			e.checking = false
		}
		if err != nil {
			return err
		}
		now = hs.now()
		switch {
		case check && recheckErr == nil && rate <= 0:
			return nil // the limit was removed
		case check && recheckErr == nil:
			hs.setRate(e, rate, now)
		case !recheck && fired && b.rateTurn.Equal(turn):
			e.last = later(e.last, turn)
			hs.metrics.held(HeldByRateLimit, now.Sub(start))
			return nil
		}
	}
}

// setRate puts the endpoint's limit of rate exchanges per second in force. A change re-times the
// turns already booked under the old one, in their order, from the first turn the new limit gives
// after the last exchange that went: raised, the held exchanges come sooner; lowered, later.
// Exchanges waiting here for their turn wake to read theirs again; those held back read theirs
// when they come back (the API signals their workflows to come back at once: docs/api.md).
func (hs *hosts) setRate(e *endpoint, rate int, now time.Time) {
	if e.rate == rate {
		return
	}
	e.rate = rate
	if e.retimed == nil {
		e.retimed = make(chan struct{})
	}
	var ahead []*booking
	for _, b := range hs.booked {
		if b.ep == e && !b.rateTurn.IsZero() {
			ahead = append(ahead, b)
		}
	}
	slices.SortFunc(ahead, func(x, y *booking) int { return x.rateTurn.Compare(y.rateTurn) })
	next := now
	if !e.last.IsZero() {
		next = later(e.last.Add(e.interval()), now)
	}
	for _, b := range ahead {
		b.rateTurn = next
		next = next.Add(e.interval())
	}
	e.next = next
	close(e.retimed)
	e.retimed = make(chan struct{})
}

func (e *endpoint) interval() time.Duration { return time.Second / time.Duration(e.rate) }

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

	var took time.Duration
	switch o {
	case answered, endpointBusy, endpointFailed, hostFailed:
		took = now.Sub(t.started)
	case endpointTimedOut:
		took = hs.timeout
	}
	respace := false
	if took > 0 {
		h.estimate, h.measured = observe(h.estimate, h.measured, took)
		l := h.lineOf(t.account)
		before := l.estimate
		l.estimate, l.measured = observe(l.estimate, l.measured, took)
		respace = l.estimate > before*5/4 || l.estimate < before*4/5
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
	if respace {
		// After dispatch, so that the account's slots are counted with the one just freed refilled.
		hs.respace(h, t.account, now)
	}
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

// observe adds an exchange that took d to a moving average of durations.
func observe(estimate time.Duration, measured bool, d time.Duration) (time.Duration, bool) {
	if !measured {
		return d, true
	}
	return time.Duration(estimateWeight*float64(d) + (1-estimateWeight)*float64(estimate)), true
}

// lineOf is the account's line for the host's slots.
func (h *host) lineOf(account int64) *line {
	l := h.lines[account]
	if l == nil {
		l = &line{estimate: h.estimate}
		h.lines[account] = l
	}
	return l
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
// appointments still ahead are kept. Bookings whose turns are idleAfter past are forgotten too:
// their exchanges never came back (a workflow canceled, a worker that took over).
func (hs *hosts) sweep(now time.Time) {
	if now.Sub(hs.lastSweep) < sweepInterval {
		return
	}
	hs.lastSweep = now
	for key, h := range hs.byKey {
		if h.breaker.state == closed && h.inFlight == 0 && len(h.waiters) == 0 && now.Sub(h.lastUsed) > idleAfter && !latest(h.lines).After(now) {
			delete(hs.byKey, key)
		}
	}
	for key, e := range hs.endpoints {
		if e.breaker.state == closed && e.inFlight == 0 && now.Sub(e.lastUsed) > idleAfter && !e.tail.After(now) && !e.next.After(now) {
			delete(hs.endpoints, key)
		}
	}
	for name, b := range hs.booked {
		if now.Sub(later(b.rateTurn, b.slotTurn)) > idleAfter {
			delete(hs.booked, name)
		}
	}
}

func latest(lines map[int64]*line) time.Time {
	var t time.Time
	for _, l := range lines {
		t = later(t, l.tail)
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
	case ClassRefused, ClassDNS:
		return hostFailed
	case ClassTLS, ClassNetwork:
		// A handshake's outcome depends on the client as much as on the host: the certificate a
		// webhook presents (or does not), the CAs it trusts. One account's settings failing it
		// says nothing of the host that other accounts' webhooks reach with theirs.
		return endpointFailed
	case ClassProxy, ClassProxyUpstream:
		return neutral // our proxy's failure, not the receiver's
	}
	return neutral
}
