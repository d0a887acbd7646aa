package egress

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// The fair-share scheduler on its own: hosts with a test clock, exchanges admitted and ended by
// hand. Waits run on real timers, so waiting exchanges run in goroutines.

const testHost = "receiver.example:443"

func testHosts(o Options) (*hosts, *fakeClock) {
	clock := newFakeClock()
	o.Now = clock.Now
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	return newHosts(o.withDefaults(), nil), clock
}

// endpointOf is webhook's endpoint, of account, at testHost.
func endpointOf(account, webhook int64) Endpoint {
	return Endpoint{Account: account, Webhook: webhook, key: fmt.Sprintf("%d https://%s/%d", webhook, testHost, webhook)}
}

func mustAcquire(t *testing.T, hs *hosts, ep Endpoint) ticket {
	t.Helper()
	tk, err := hs.acquire(context.Background(), testHost, ep, 0, 0, "")
	if err != nil {
		t.Fatalf("acquire for webhook %d: %v", ep.Webhook, err)
	}
	return tk
}

// end ends an admitted exchange with outcome o.
func (hs *hosts) end(t ticket, o outcome) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.finish(t, o, hs.now())
}

type acquired struct {
	account int64
	t       ticket
	err     error
}

// goAcquire asks for a turn that may wait up to wait; the result arrives on out.
func goAcquire(hs *hosts, ep Endpoint, wait time.Duration, out chan<- acquired) {
	go func() {
		tk, err := hs.acquire(context.Background(), testHost, ep, wait, 0, "")
		out <- acquired{ep.Account, tk, err}
	}()
}

// waitWaiters waits until testHost has n exchanges waiting for a slot.
func waitWaiters(t *testing.T, hs *hosts, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hs.mu.Lock()
		got := 0
		if h := hs.byKey[testHost]; h != nil {
			got = len(h.waiters)
		}
		hs.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d exchanges waiting, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// next returns the next admitted exchange, failing on an error.
func next(t *testing.T, out <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-out:
		if a.err != nil {
			t.Fatalf("account %d: %v", a.account, a.err)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no exchange admitted")
	}
	return acquired{}
}

func nothingAdmitted(t *testing.T, out <-chan acquired) {
	t.Helper()
	select {
	case a := <-out:
		t.Fatalf("account %d admitted (%v), want every waiter still waiting", a.account, a.err)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestAccountShareLeavesRoom: one account may hold three quarters of a host's slots; the last
// quarter is there for the others at once, even while that account has more to send.
func TestAccountShareLeavesRoom(t *testing.T) {
	const b, c = 1, 2
	hs, _ := testHosts(Options{HostConcurrency: 8, EndpointConcurrency: 8})
	for i := range 6 {
		mustAcquire(t, hs, endpointOf(b, int64(100+i)))
	}
	_, err := hs.acquire(context.Background(), testHost, endpointOf(b, 110), 0, 0, "")
	held(t, err, HeldByHostCap)
	mustAcquire(t, hs, endpointOf(c, 200))
	mustAcquire(t, hs, endpointOf(c, 201))
	_, err = hs.acquire(context.Background(), testHost, endpointOf(c, 202), 0, 0, "")
	held(t, err, HeldByHostCap) // now the host is at its cap
}

// TestFairShareOneAccountAgainstMany: with the host at its cap, account B holding most of it and
// having exchanges waiting, account C's one exchange, arriving last, gets the next free slot.
func TestFairShareOneAccountAgainstMany(t *testing.T) {
	const b, c, d = 1, 2, 3
	hs, _ := testHosts(Options{HostConcurrency: 8, EndpointConcurrency: 8})
	var slots []ticket
	for i := range 6 {
		slots = append(slots, mustAcquire(t, hs, endpointOf(b, int64(100+i%4))))
	}
	mustAcquire(t, hs, endpointOf(d, 300))
	mustAcquire(t, hs, endpointOf(d, 301))
	out := make(chan acquired, 8)
	// B may keep a quarter of the cap waiting in the worker; more are held back at once, with an
	// appointment, holding nothing.
	goAcquire(hs, endpointOf(b, 100), time.Minute, out)
	waitWaiters(t, hs, 1)
	goAcquire(hs, endpointOf(b, 101), time.Minute, out)
	waitWaiters(t, hs, 2)
	_, err := hs.acquire(context.Background(), testHost, endpointOf(b, 102), time.Minute, 0, "")
	held(t, err, HeldByHostCap)

	goAcquire(hs, endpointOf(c, 200), time.Minute, out)
	waitWaiters(t, hs, 3)
	nothingAdmitted(t, out)

	hs.end(slots[0], endpointTimedOut)
	if got := next(t, out); got.account != c {
		t.Fatalf("the freed slot went to account %d, want C (%d), which held none", got.account, c)
	}
	hs.end(slots[1], endpointTimedOut)
	if got := next(t, out); got.account != b {
		t.Fatalf("the next slot went to account %d, want B's oldest waiter", got.account)
	}
	waitWaiters(t, hs, 1)
}

// TestFairShareSeveralAccounts: with B holding its share and X the rest, and C, D and E waiting
// behind B's own waiter, the first slots B frees go to C and D, which hold none, while B still
// holds some; once B holds none either, B's older waiter goes before E; X's slot goes to E.
func TestFairShareSeveralAccounts(t *testing.T) {
	const b, c, d, e, x = 1, 2, 3, 4, 5
	hs, _ := testHosts(Options{HostConcurrency: 4, EndpointConcurrency: 4})
	var slots []ticket
	for i := range 3 {
		slots = append(slots, mustAcquire(t, hs, endpointOf(b, int64(100+i))))
	}
	slots = append(slots, mustAcquire(t, hs, endpointOf(x, 500)))
	out := make(chan acquired, 8)
	for i, account := range []int64{b, c, d, e} {
		goAcquire(hs, endpointOf(account, account*100+50), time.Minute, out)
		waitWaiters(t, hs, i+1)
	}
	var order []int64
	for i := range 4 {
		hs.end(slots[i], answered)
		order = append(order, next(t, out).account)
	}
	if want := []int64{c, d, b, e}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("slots went to accounts %v, want %v", order, want)
	}
}

// TestFairShareWithinAnAccount: among one account's waiters, the endpoint holding fewer slots goes
// first.
func TestFairShareWithinAnAccount(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 8, EndpointConcurrency: 8})
	var slots []ticket
	for range 5 {
		slots = append(slots, mustAcquire(t, hs, endpointOf(1, 10)))
	}
	for i := range 3 {
		slots = append(slots, mustAcquire(t, hs, endpointOf(2, int64(30+i))))
	}
	out := make(chan acquired, 2)
	busy, quiet := endpointOf(1, 10), endpointOf(1, 11)
	go func() {
		tk, err := hs.acquire(context.Background(), testHost, busy, time.Minute, 0, "")
		out <- acquired{10, tk, err}
	}()
	waitWaiters(t, hs, 1)
	go func() {
		tk, err := hs.acquire(context.Background(), testHost, quiet, time.Minute, 0, "")
		out <- acquired{11, tk, err}
	}()
	waitWaiters(t, hs, 2)
	hs.end(slots[7], answered) // the other account's slot frees; account 1 is the only one waiting
	if got := next(t, out); got.account != 11 {
		t.Fatalf("the slot went to webhook %d, want 11, which held none", got.account)
	}
}

// TestEndpointCap: an endpoint at its cap waits or is held back while the host has room for its
// other endpoints; a webhook's own MaxInFlight overrides the default.
func TestEndpointCap(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 8, EndpointConcurrency: 2})
	x, y := endpointOf(1, 10), endpointOf(1, 11)
	x1 := mustAcquire(t, hs, x)
	mustAcquire(t, hs, x)
	_, err := hs.acquire(context.Background(), testHost, x, 0, 0, "")
	held(t, err, HeldByEndpointCap)
	yt := mustAcquire(t, hs, y)

	out := make(chan acquired, 1)
	goAcquire(hs, x, time.Minute, out)
	waitWaiters(t, hs, 1)
	hs.end(yt, answered) // a slot of the host, not of X
	nothingAdmitted(t, out)
	hs.end(x1, answered)
	next(t, out)

	own := endpointOf(2, 20)
	own.MaxInFlight = 3
	for range 3 {
		mustAcquire(t, hs, own)
	}
	_, err = hs.acquire(context.Background(), testHost, own, 0, 0, "")
	held(t, err, HeldByEndpointCap)
}

// TestHostCapAppointmentsPerAccount: exchanges held back by a full host get appointments on their
// account's own line, so one account's backlog does not push another's turn out.
func TestHostCapAppointmentsPerAccount(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 4, EndpointConcurrency: 4})
	for i := range 3 {
		mustAcquire(t, hs, endpointOf(1, int64(10+i)))
	}
	mustAcquire(t, hs, endpointOf(3, 30))
	const spacing = defaultEstimate / 4
	for turn := 1; turn <= 5; turn++ {
		_, err := hs.acquire(context.Background(), testHost, endpointOf(1, 19), 0, 0, "")
		if retryIn := held(t, err, HeldByHostCap); retryIn < time.Duration(turn)*spacing {
			t.Fatalf("B's refusal %d: RetryIn %s, want at least %s", turn, retryIn, time.Duration(turn)*spacing)
		}
	}
	_, err := hs.acquire(context.Background(), testHost, endpointOf(2, 20), 0, 0, "")
	if retryIn := held(t, err, HeldByHostCap); retryIn >= spacing+spacing/10 {
		t.Fatalf("C's first refusal: RetryIn %s, want one turn (%s), not behind B's line", retryIn, spacing)
	}
}

// TestEndpointBreakerLeavesTheHost: one endpoint's timeouts, or broken connections, open its own
// breaker; the host's other endpoints, of its account or another, go on, and the host's breaker
// stays closed.
func TestEndpointBreakerLeavesTheHost(t *testing.T) {
	const cooldown = 10 * time.Second
	hs, clock := testHosts(Options{HostConcurrency: 8, BreakerFailures: 3, BreakerCooldown: cooldown})
	x := endpointOf(1, 10)
	for range 3 {
		hs.end(mustAcquire(t, hs, x), endpointTimedOut)
	}
	_, err := hs.acquire(context.Background(), testHost, x, 0, 0, "")
	var open *CircuitOpenError
	if !errors.As(err, &open) || open.Scope != scopeEndpoint {
		t.Fatalf("X: got %v, want its breaker open", err)
	}
	hs.end(mustAcquire(t, hs, endpointOf(1, 11)), answered)
	hs.end(mustAcquire(t, hs, endpointOf(2, 20)), answered)

	z := endpointOf(1, 12)
	for range 3 {
		hs.end(mustAcquire(t, hs, z), endpointFailed)
	}
	if _, err := hs.acquire(context.Background(), testHost, z, 0, 0, ""); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("Z after three broken connections: got %v, want ErrCircuitOpen", err)
	}
	if st := hs.byKey[testHost].breaker.state; st != closed {
		t.Fatalf("host breaker %v, want closed", st)
	}

	// Past the cool-down X is probed; its other exchanges wait for the probe, and do not fail.
	clock.Advance(cooldown)
	probe := mustAcquire(t, hs, x)
	_, err = hs.acquire(context.Background(), testHost, x, 0, 0, "")
	held(t, err, HeldByBreaker)
	hs.end(probe, answered)
	hs.end(mustAcquire(t, hs, x), answered)
}

// TestHostBreakerTakesHostEvidenceOnly: timeouts, resets and 5xx spread over many endpoints of many
// accounts never open the host's breaker (each endpoint's own does); refused connections and DNS
// failures do, whichever endpoints they came from, and then every endpoint fails fast.
func TestHostBreakerTakesHostEvidenceOnly(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 8, BreakerFailures: 3})
	for i := range 12 {
		o := []outcome{endpointTimedOut, endpointFailed, endpointBusy}[i%3]
		hs.end(mustAcquire(t, hs, endpointOf(int64(i), int64(100+i))), o)
	}
	if st := hs.byKey[testHost].breaker.state; st != closed {
		t.Fatalf("host breaker %v after failures of 12 endpoints of 12 accounts, want closed", st)
	}
	for i := range 3 {
		hs.end(mustAcquire(t, hs, endpointOf(int64(i), int64(200+i))), hostFailed)
	}
	_, err := hs.acquire(context.Background(), testHost, endpointOf(9, 900), 0, 0, "")
	var open *CircuitOpenError
	if !errors.As(err, &open) || open.Scope != scopeHost {
		t.Fatalf("got %v, want the host's breaker open", err)
	}
}

// TestEndpointWindow: each 5xx or 429 halves what the endpoint may have in flight, down to one;
// each success lets one more in, back up to its cap. Exchanges it holds back wait, as for its cap.
func TestEndpointWindow(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 16, EndpointConcurrency: 4})
	x := endpointOf(1, 10)
	inFlight := func(n int) []ticket {
		t.Helper()
		var out []ticket
		for range n {
			out = append(out, mustAcquire(t, hs, x))
		}
		if _, err := hs.acquire(context.Background(), testHost, x, 0, 0, ""); err == nil {
			t.Fatalf("an exchange over %d in flight was admitted", n)
		} else {
			held(t, err, HeldByEndpointCap)
		}
		return out
	}
	end := func(ts []ticket, o outcome) {
		for _, tk := range ts {
			hs.end(tk, o)
		}
	}
	ts := inFlight(4)
	end(ts[:1], endpointBusy) // 4 -> 2
	end(ts[1:], answered)     // 2 -> 3 -> 4: the cap again
	ts = inFlight(4)
	end(ts[:2], endpointBusy) // 4 -> 2 -> 1
	end(ts[2:], endpointBusy) // stays 1
	ts = inFlight(1)
	end(ts, answered) // 2
	ts = inFlight(2)
	end(ts, answered) // 4: the cap
	ts = inFlight(4)
	// Another endpoint of the host is not narrowed.
	mustAcquire(t, hs, endpointOf(1, 11))
	end(ts, answered)
}

// TestRateLimit: an endpoint's rate limit spaces its exchanges; one whose turn comes within its
// wait waits for it, others are held back with their turn as the appointment, and take it when
// they come back.
func TestRateLimit(t *testing.T) {
	hs, clock := testHosts(Options{HostConcurrency: 8, EndpointConcurrency: 8})
	ep := endpointOf(1, 10)
	ep.RateLimit = 4 // a turn every 250ms
	mustAcquire(t, hs, ep)
	for turn := 1; turn <= 3; turn++ {
		_, err := hs.acquire(context.Background(), testHost, ep, 0, 0, fmt.Sprint(turn))
		if retryIn, want := held(t, err, HeldByRateLimit), time.Duration(turn)*250*time.Millisecond; retryIn != want {
			t.Fatalf("held %d: RetryIn %s, want %s", turn, retryIn, want)
		}
	}
	// Another endpoint of the same account and host is not limited.
	mustAcquire(t, hs, endpointOf(1, 11))
	clock.Advance(250 * time.Millisecond)
	if _, err := hs.acquire(context.Background(), testHost, ep, 0, 0, "1"); err != nil {
		t.Fatalf("the first held back, at its turn: %v", err)
	}
	// The next free turn is 750ms away, after the two still booked: an exchange that may wait a
	// second takes it.
	if _, err := hs.acquire(context.Background(), testHost, ep, time.Second, 0, ""); err != nil {
		t.Fatalf("an exchange that may wait: %v", err)
	}
	// One that may wait 200ms, whose turn is a second away, is held back to come back 100ms (half
	// its wait) before its turn, and wait for it here then.
	_, err := hs.acquire(context.Background(), testHost, ep, 200*time.Millisecond, 0, "early")
	if retryIn := held(t, err, HeldByRateLimit); retryIn != 900*time.Millisecond {
		t.Fatalf("an exchange that may wait 200ms, its turn 1s away: RetryIn %s, want 900ms", retryIn)
	}
}

// TestWaitEndsHeld: an exchange that waited its whole wait is held back with an appointment and
// leaves no waiter behind; one whose caller gives up returns the caller's error.
func TestWaitEndsHeld(t *testing.T) {
	hs, _ := testHosts(Options{HostConcurrency: 1})
	mustAcquire(t, hs, endpointOf(1, 10))
	_, err := hs.acquire(context.Background(), testHost, endpointOf(2, 20), 20*time.Millisecond, 0, "")
	held(t, err, HeldByHostCap)
	waitWaiters(t, hs, 0)

	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() {
		_, err := hs.acquire(ctx, testHost, endpointOf(2, 20), time.Minute, 0, "")
		out <- err
	}()
	waitWaiters(t, hs, 1)
	cancel()
	if err := <-out; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the caller's cancellation", err)
	}
	waitWaiters(t, hs, 0)
}

// TestQuickWait: an exchange with a quick wait whose turn is due within it waits in line, past
// its account's share of waiters, and books no appointment; one whose turn is further out by the
// host's estimate is held back at once, and one whose wait runs out is held back; each of those
// books one appointment.
func TestQuickWait(t *testing.T) {
	hs, clock := testHosts(Options{HostConcurrency: 4, EndpointConcurrency: 1})
	ep := endpointOf(1, 10)
	tail := func() time.Time {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return hs.endpoints[ep.key].tail
	}
	quick := func(wait time.Duration, out chan<- acquired) {
		go func() {
			tk, err := hs.acquire(context.Background(), testHost, ep, 0, wait, "")
			out <- acquired{ep.Account, tk, err}
		}()
	}
	// Exchanges of 10ms: a turn at the capped endpoint is due within milliseconds.
	first := mustAcquire(t, hs, ep)
	clock.Advance(10 * time.Millisecond)
	hs.end(first, answered)

	busy := mustAcquire(t, hs, ep)
	const waiters = 5 // past the account's share of waiters on the host (one, at a cap of 4)
	out := make(chan acquired, waiters)
	for range waiters {
		quick(time.Minute, out)
	}
	waitWaiters(t, hs, waiters)
	if !tail().IsZero() {
		t.Fatalf("quick waiters booked appointments: tail %v", tail())
	}
	hs.end(busy, answered)
	for range waiters {
		got := <-out
		if got.err != nil {
			t.Fatalf("a quick waiter: %v", got.err)
		}
		hs.end(got.t, answered)
	}
	if !tail().IsZero() {
		t.Fatalf("quick waiters booked appointments: tail %v", tail())
	}

	// A wait that runs out is held back, with one appointment.
	busy = mustAcquire(t, hs, ep)
	quick(20*time.Millisecond, out)
	held(t, (<-out).err, HeldByEndpointCap)
	booked := tail()
	if booked.IsZero() {
		t.Fatal("a quick wait that ran out booked no appointment")
	}
	waitWaiters(t, hs, 0)

	// Exchanges of 30s: the next turn is beyond a quick wait of 10s, so the exchange is held back
	// at once; it never joins the line.
	clock.Advance(30 * time.Second)
	hs.end(busy, answered)
	for range 20 {
		tk := mustAcquire(t, hs, ep)
		clock.Advance(30 * time.Second)
		hs.end(tk, answered)
	}
	busy = mustAcquire(t, hs, ep)
	quick(10*time.Second, out)
	for got := false; !got; {
		select {
		case r := <-out:
			held(t, r.err, HeldByEndpointCap)
			got = true
		default:
			hs.mu.Lock()
			n := len(hs.byKey[testHost].waiters)
			hs.mu.Unlock()
			if n > 0 {
				t.Fatal("an exchange due far beyond its quick wait joined the line")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if tail().Equal(booked) {
		t.Fatal("an exchange held back at once booked no appointment")
	}
	hs.end(busy, answered)
}

// BenchmarkTurn is the scheduler's own cost per exchange: a turn taken and given back, on a host
// with room, and on one whose 64 endpoints of 8 accounts keep it at its cap of 16 (each exchange
// then also wakes a waiter).
func BenchmarkTurn(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		hs, _ := testHosts(Options{HostConcurrency: 16})
		ep := endpointOf(1, 10)
		for b.Loop() {
			tk, err := hs.acquire(context.Background(), testHost, ep, 0, 0, "delivery")
			if err != nil {
				b.Fatal(err)
			}
			hs.end(tk, answered)
		}
	})
	b.Run("at-cap", func(b *testing.B) {
		hs, _ := testHosts(Options{HostConcurrency: 16, EndpointConcurrency: 16})
		b.SetParallelism(32) // 32 x GOMAXPROCS goroutines for 16 slots: most exchanges wait
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := n.Add(1)
			ep := endpointOf(i%8, 100+i%64)
			name := fmt.Sprint("delivery ", i) // each goroutine's exchanges one delivery's attempts
			for pb.Next() {
				tk, err := hs.acquire(context.Background(), testHost, ep, time.Minute, 0, name)
				if err != nil {
					var held *HeldError
					if errors.As(err, &held) {
						continue // its account already has its share waiting
					}
					b.Error(err)
					return
				}
				hs.end(tk, answered)
			}
		})
	})
}
