package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// holdingServer answers each request only when the test releases it, with the status it sends.
// Requests to /hang are not announced, so only a timeout ends them.
type holdingServer struct {
	requests atomic.Int32
	arrived  chan struct{}
	release  chan int
	done     chan struct{}
}

func newHoldingServer(t *testing.T) (*holdingServer, *httptest.Server, *countingListener) {
	t.Helper()
	h := &holdingServer{arrived: make(chan struct{}, 16), release: make(chan int), done: make(chan struct{})}
	srv, ln := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		var release <-chan int // nil for /hang: never released
		if r.URL.Path != "/hang" {
			release = h.release
			h.arrived <- struct{}{}
		}
		select {
		case status := <-release:
			w.WriteHeader(status)
		case <-r.Context().Done():
			// Returning would send a 200, which a client closing its TLS connection can
			// still read; abort without an answer.
			panic(http.ErrAbortHandler)
		case <-h.done:
		}
	})
	// Registered after newTLSServer's cleanup, so it runs first and unblocks the handlers that
	// srv.Close waits for.
	t.Cleanup(func() { close(h.done) })
	return h, srv, ln
}

func (h *holdingServer) waitArrivals(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for range n {
		select {
		case <-h.arrived:
		case <-deadline:
			t.Fatalf("fewer than %d requests arrived", n)
		}
	}
}

type postResult struct {
	resp *Response
	err  error
}

func goPost(c *Client, url string) <-chan postResult {
	out := make(chan postResult, 1)
	go func() {
		resp, err := c.Post(context.Background(), url, testHeader, nil)
		out <- postResult{resp, err}
	}()
	return out
}

// held asserts that err holds an exchange back for reason and returns its appointment.
func held(t *testing.T, err error, reason HoldReason) time.Duration {
	t.Helper()
	var h *HeldError
	if !errors.As(err, &h) || h.Reason != reason {
		t.Fatalf("got %v, want a *HeldError by %s", err, reason)
	}
	return h.RetryIn
}

func TestHostConcurrencyCap(t *testing.T) {
	x, xSrv, xListener := newHoldingServer(t)
	xURL := xSrv.URL
	y, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {})
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	const maxWait = 3 * time.Second
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, y),
		HostConcurrency: 2, MaxWait: maxWait, Now: clock.Now, Registerer: reg,
	})

	// Two endpoints (paths) of one host take its two slots.
	first, second := goPost(c, xURL+"/a"), goPost(c, xURL+"/b")
	x.waitArrivals(t, 2)

	// Before any exchange completes the estimate is 1s: turns are 1s/2 apart.
	const spacing = 500 * time.Millisecond
	for turn := 1; turn <= 6; turn++ {
		_, err := c.Post(context.Background(), xURL+"/c", testHeader, nil)
		if retryIn := held(t, err, HeldByHostCap); retryIn != time.Duration(turn)*spacing {
			t.Fatalf("refusal %d: RetryIn %s, want %s", turn, retryIn, time.Duration(turn)*spacing)
		}
	}
	// The 7th turn is 3.5s out, beyond MaxWait, which bounds only a breaker probe's hold: the
	// appointment is the turn, so the exchange comes back once.
	_, err := c.Post(context.Background(), xURL+"/c", testHeader, nil)
	if retryIn := held(t, err, HeldByHostCap); retryIn != 7*spacing {
		t.Fatalf("beyond MaxWait: RetryIn %s, want %s", retryIn, 7*spacing)
	}
	// A second later the tail (3.5s from the start) is 2.5s away, so the next turn is booked after it.
	clock.Advance(time.Second)
	_, err = c.Post(context.Background(), xURL+"/c", testHeader, nil)
	if retryIn := held(t, err, HeldByHostCap); retryIn != 6*spacing {
		t.Fatalf("after the clock moved: RetryIn %s, want %s", retryIn, 6*spacing)
	}

	if n := xListener.accepted(t); n != 2 {
		t.Fatalf("host X accepted %d connections, want the 2 admitted", n)
	}
	if n := x.requests.Load(); n != 2 {
		t.Fatalf("host X saw %d requests, want 2", n)
	}
	if got := metricValue(t, reg, "webhookd_egress_waits_total", "reason", "host_cap"); got != 8 {
		t.Fatalf("webhookd_egress_waits_total{reason=host_cap} = %v, want 8", got)
	}

	// Another port is another host, with slots of its own.
	resp, err := c.Post(context.Background(), y.URL, testHeader, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("host Y: %v, %v", resp, err)
	}

	x.release <- http.StatusOK
	x.release <- http.StatusOK
	for _, ch := range []<-chan postResult{first, second} {
		if r := <-ch; r.err != nil || r.resp.StatusCode != http.StatusOK {
			t.Fatalf("held request: %v, %v", r.resp, r.err)
		}
	}
	// Slots are released: X takes requests again.
	third := goPost(c, xURL+"/c")
	x.waitArrivals(t, 1)
	x.release <- http.StatusAccepted
	if r := <-third; r.err != nil || r.resp.StatusCode != http.StatusAccepted {
		t.Fatalf("after release: %v, %v", r.resp, r.err)
	}
}

func TestAppointmentsFollowTheEstimate(t *testing.T) {
	hs, clock := testHosts(Options{HostConcurrency: 4, Timeout: 8 * time.Second})
	var tickets []ticket
	for i := range 4 {
		tickets = append(tickets, mustAcquire(t, hs, endpointOf(int64(i), int64(i))))
	}
	// The first completed exchange sets the estimate; a timeout counts as the whole Timeout.
	clock.Advance(100 * time.Millisecond)
	hs.end(tickets[0], endpointTimedOut)
	tickets[0] = mustAcquire(t, hs, endpointOf(0, 10))
	_, err := hs.acquire(context.Background(), testHost, endpointOf(1, 11), 0, 0, "")
	if retryIn := held(t, err, HeldByHostCap); retryIn < 2*time.Second || retryIn >= 2*time.Second+200*time.Millisecond {
		t.Fatalf("RetryIn %s, want 8s/4 plus under a tenth", retryIn)
	}
	// Faster answers pull the estimate down, and with it the spacing of later turns.
	clock.Advance(3 * time.Second) // past the booked turn
	for i := range 2 {
		hs.end(tickets[i], answered)
	}
	mustAcquire(t, hs, endpointOf(0, 12))
	mustAcquire(t, hs, endpointOf(1, 13))
	_, err = hs.acquire(context.Background(), testHost, endpointOf(5, 14), 0, 0, "")
	// Estimate: 8s, then 0.2*3s+0.8*8s = 7s, then 0.2*3.1s+0.8*7s = 6.22s; spacing 6.22s/4.
	want := time.Duration(0.2*float64(3100*time.Millisecond)+0.8*float64(7*time.Second)) / 4
	if retryIn := held(t, err, HeldByHostCap); retryIn < want || retryIn >= want+want/10 {
		t.Fatalf("RetryIn %s, want in [%s, %s)", retryIn, want, want+want/10)
	}
}

func TestEndpointBreakerOpensOnTimeouts(t *testing.T) {
	ln := hangingListener(t)
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	const cooldown = 30 * time.Second
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, Timeout: 200 * time.Millisecond,
		BreakerFailures: 3, BreakerCooldown: cooldown, Now: clock.Now, Registerer: reg,
	})
	url := hostURL(ln.Addr().String())

	for i := range 3 {
		_, err := c.Post(context.Background(), url, testHeader, nil)
		if class, _ := Classify(err); class != ClassTimeout {
			t.Fatalf("attempt %d: got %v, want a timeout", i+1, err)
		}
	}
	if n := ln.accepted(t); n != 3 {
		t.Fatalf("accepted %d connections, want 3", n)
	}
	_, err := c.Post(context.Background(), url, testHeader, nil)
	var open *CircuitOpenError
	if !errors.Is(err, ErrCircuitOpen) || !errors.As(err, &open) || open.Scope != scopeEndpoint {
		t.Fatalf("got %v, want the endpoint's breaker open", err)
	}
	if class, _ := Classify(err); class != ClassCircuitOpen {
		t.Fatalf("class %q, want %q", class, ClassCircuitOpen)
	}
	if n := ln.accepted(t); n != 3 {
		t.Fatalf("accepted %d connections, want still 3", n)
	}
	if open, refused := metricValue(t, reg, "webhookd_egress_circuits_open", "scope", "endpoint"), metricValue(t, reg, "webhookd_egress_circuit_open_total", "scope", "endpoint"); open != 1 || refused != 1 {
		t.Fatalf("circuits_open %v, circuit_open_total %v; want 1, 1", open, refused)
	}
	if host := metricValue(t, reg, "webhookd_egress_circuits_open", "scope", "host"); host != 0 {
		t.Fatalf("host circuits open %v, want 0: timeouts are the endpoint's", host)
	}
	if got := metricValue(t, reg, "webhookd_egress_endpoint_breaker", "state", "open"); got != 1 {
		t.Fatalf("webhookd_egress_endpoint_breaker{state=open} = %v, want 1", got)
	}
	// Another path on the same host is another endpoint: it is still tried.
	if _, err := c.Post(context.Background(), url+"/other", testHeader, nil); errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("another endpoint of the host: got %v, want an attempt", err)
	}

	clock.Advance(cooldown - time.Second)
	if _, err := c.Post(context.Background(), url, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("before the cool-down: got %v, want ErrCircuitOpen", err)
	}
	// Past the cool-down one probe goes out; it times out too, so the breaker re-opens.
	clock.Advance(2 * time.Second)
	if _, err := c.Post(context.Background(), url, testHeader, nil); errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("probe: got %v, want an attempt", err)
	}
	if n := ln.accepted(t); n != 5 {
		t.Fatalf("accepted %d connections, want 5 with the other endpoint and the probe", n)
	}
	if _, err := c.Post(context.Background(), url, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after a failed probe: got %v, want ErrCircuitOpen", err)
	}
	if open := metricValue(t, reg, "webhookd_egress_circuits_open", "scope", "endpoint"); open != 1 {
		t.Fatalf("circuits_open %v, want 1", open)
	}
}

func TestHostBreakerOpensOnRefusedConnections(t *testing.T) {
	addr := closedPort(t)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, BreakerFailures: 2, Now: newFakeClock().Now})
	// Refused connections are about the host, whichever path they were for.
	for i, path := range []string{"/a", "/b"} {
		_, err := c.Post(context.Background(), "https://"+addr+path, testHeader, nil)
		if class, _ := Classify(err); class != ClassRefused {
			t.Fatalf("attempt %d: got %v, want refused", i+1, err)
		}
	}
	_, err := c.Post(context.Background(), "https://"+addr+"/c", testHeader, nil)
	var open *CircuitOpenError
	if !errors.As(err, &open) || open.Scope != scopeHost {
		t.Fatalf("got %v, want the host's breaker open", err)
	}
}

func TestEndpointBreakerProbe(t *testing.T) {
	x, xSrv, ln := newHoldingServer(t)
	xURL := xSrv.URL
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	const cooldown = 30 * time.Second
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, xSrv), Timeout: 300 * time.Millisecond,
		BreakerFailures: 2, BreakerCooldown: cooldown, Now: clock.Now, Registerer: reg,
	})
	// Two requests the server holds past the timeout open the endpoint's breaker.
	for range 2 {
		result := goPost(c, xURL)
		x.waitArrivals(t, 1)
		if r := <-result; !isTimeout(r.err) {
			t.Fatalf("got %v, %v; want a timeout", r.resp, r.err)
		}
	}
	if _, err := c.Post(context.Background(), xURL, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
	clock.Advance(cooldown)

	// The probe is held by the server; meanwhile the endpoint's other exchanges wait for its
	// outcome: held back, not failed.
	probe := goPost(c, xURL)
	x.waitArrivals(t, 1)
	before := ln.accepted(t)
	_, err := c.Post(context.Background(), xURL, testHeader, nil)
	held(t, err, HeldByBreaker)
	if n := ln.accepted(t); n != before {
		t.Fatalf("accepted %d connections during the probe, want %d", n, before)
	}
	if got := metricValue(t, reg, "webhookd_egress_endpoint_breaker", "state", "half_open"); got != 1 {
		t.Fatalf("webhookd_egress_endpoint_breaker{state=half_open} = %v, want 1", got)
	}

	// Any answer closes the breaker, a 500 included: the endpoint answers in time again.
	x.release <- http.StatusInternalServerError
	if r := <-probe; r.err != nil || r.resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("probe: %v, %v", r.resp, r.err)
	}
	if open := metricValue(t, reg, "webhookd_egress_circuits_open", "scope", "endpoint"); open != 0 {
		t.Fatalf("circuits_open %v, want 0", open)
	}
	next := goPost(c, xURL)
	x.waitArrivals(t, 1)
	x.release <- http.StatusOK
	if r := <-next; r.err != nil || r.resp.StatusCode != http.StatusOK {
		t.Fatalf("after the probe: %v, %v", r.resp, r.err)
	}
}

func isTimeout(err error) bool {
	class, _ := Classify(err)
	return class == ClassTimeout
}

// TestEndpointAnswersNeverTripABreaker: 5xx and 429 answers, however many in a row, never fail an
// endpoint's next exchange fast (they narrow its window instead, TestEndpointWindow); our own
// refusals (blocked addresses) count for nothing.
func TestEndpointAnswersNeverTripABreaker(t *testing.T) {
	x, xSrv, _ := newHoldingServer(t)
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, xSrv), Timeout: time.Second,
		BreakerFailures: 2, Now: newFakeClock().Now,
	})
	for _, status := range []int{503, 500, 429, 502, 504, 429, 200} {
		result := goPost(c, xSrv.URL)
		select {
		case <-x.arrived:
		case r := <-result:
			t.Fatalf("before %d: refused before reaching the server: %v", status, r.err)
		}
		x.release <- status
		if r := <-result; r.err != nil || r.resp.StatusCode != status {
			t.Fatalf("got %v, %v; want %d", r.resp, r.err, status)
		}
	}

	strict := newClient(t, Options{RootCAs: trust(t, xSrv), BreakerFailures: 2})
	for i := range 5 {
		if _, err := strict.Post(context.Background(), xSrv.URL, testHeader, nil); !errors.Is(err, ErrBlockedAddress) {
			t.Fatalf("attempt %d: got %v, want ErrBlockedAddress", i+1, err)
		}
	}
}

func TestBreakerIgnoresCallerCancellation(t *testing.T) {
	ln := hangingListener(t)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, BreakerFailures: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		if _, err := c.Post(ctx, hostURL(ln.Addr().String()), testHeader, nil); errors.Is(err, ErrCircuitOpen) || err == nil {
			t.Fatalf("got %v, want the caller's cancellation", err)
		}
	}
}

// metricValue reads one counter or gauge from reg: the series with the given label name and value
// pairs, or the only series.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
		return 0 // no such series: a gauge that exports only what is not closed
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// answerErr is a broker's refusal as Turn.Run sees it (Answer).
type answerErr struct{ busy bool }

func (answerErr) Error() string      { return "the broker refused the publish" }
func (a answerErr) Overloaded() bool { return a.busy }

// TestRunJudgesAnswersAsReplies: a broker's refusals made through Turn.Run (Answer) are replies,
// never evidence against the endpoint: however many, the breaker stays closed; a network error of
// the same turns counts as it does for a POST, and opens it.
func TestRunJudgesAnswersAsReplies(t *testing.T) {
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, Timeout: time.Second, BreakerFailures: 2, Now: newFakeClock().Now})
	req := Request{URL: "nats://127.0.0.1:4222", Host: "127.0.0.1:4222", Endpoint: Endpoint{Account: 1, Webhook: 7}}
	run := func(err error) error {
		t.Helper()
		turn, terr := c.Take(context.Background(), req)
		if terr != nil {
			return terr
		}
		return turn.Run(context.Background(), func(context.Context) error { return err })
	}
	for i := range 5 {
		if err := run(answerErr{busy: i%2 == 0}); !errors.As(err, new(answerErr)) {
			t.Fatalf("refusal %d: Run returned %v, want the answer", i+1, err)
		}
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for i := range 2 {
		if err := run(reset); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("reset %d: Run returned %v", i+1, err)
		}
	}
	if err := run(nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after two broken connections: %v, want the endpoint's breaker open", err)
	}
}
