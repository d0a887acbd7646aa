package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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

func hostBusy(t *testing.T, err error) time.Duration {
	t.Helper()
	var busy *HostBusyError
	if !errors.As(err, &busy) {
		t.Fatalf("got %v, want a *HostBusyError", err)
	}
	return busy.RetryIn
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

	first, second := goPost(c, xURL), goPost(c, xURL)
	x.waitArrivals(t, 2)

	// Before any exchange completes the estimate is 1s: turns are 1s/2 apart, jitter within a
	// tenth of that.
	const spacing = 500 * time.Millisecond
	var last time.Duration
	for turn := 1; turn <= 6; turn++ {
		_, err := c.Post(context.Background(), xURL, testHeader, nil)
		retryIn := hostBusy(t, err)
		lo, hi := time.Duration(turn)*spacing, time.Duration(turn)*spacing+spacing/10
		if retryIn < lo || retryIn >= hi || retryIn <= last {
			t.Fatalf("refusal %d: RetryIn %s, want in [%s, %s) and after %s", turn, retryIn, lo, hi, last)
		}
		last = retryIn
	}
	// The 7th turn would be 3.5s out, beyond MaxWait: spread over its second half, unbooked.
	_, err := c.Post(context.Background(), xURL, testHeader, nil)
	if retryIn := hostBusy(t, err); retryIn < maxWait/2 || retryIn > maxWait {
		t.Fatalf("beyond MaxWait: RetryIn %s, want in [%s, %s]", retryIn, maxWait/2, maxWait)
	}
	// A second later the tail (3s from the start) is 2s away, so the next turn is booked after it.
	clock.Advance(time.Second)
	_, err = c.Post(context.Background(), xURL, testHeader, nil)
	if retryIn := hostBusy(t, err); retryIn < 5*spacing || retryIn >= 5*spacing+spacing/10 {
		t.Fatalf("after the clock moved: RetryIn %s, want in [%s, %s)", retryIn, 5*spacing, 5*spacing+spacing/10)
	}

	if n := xListener.accepted(t); n != 2 {
		t.Fatalf("host X accepted %d connections, want the 2 admitted", n)
	}
	if n := x.requests.Load(); n != 2 {
		t.Fatalf("host X saw %d requests, want 2", n)
	}
	if got := metricValue(t, reg, "webhookd_egress_host_busy_total"); got != 8 {
		t.Fatalf("webhookd_egress_host_busy_total = %v, want 8", got)
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
	third := goPost(c, xURL)
	x.waitArrivals(t, 1)
	x.release <- http.StatusAccepted
	if r := <-third; r.err != nil || r.resp.StatusCode != http.StatusAccepted {
		t.Fatalf("after release: %v, %v", r.resp, r.err)
	}
}

func TestAppointmentsFollowTheEstimate(t *testing.T) {
	clock := newFakeClock()
	hs := newHosts(Options{HostConcurrency: 4, Timeout: 8 * time.Second, Now: clock.Now}.withDefaults(), nil)
	var tickets []ticket
	for range 4 {
		tk, err := hs.acquire("h:443")
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	// The first completed exchange sets the estimate; a timeout counts as the whole Timeout.
	clock.Advance(100 * time.Millisecond)
	hs.release(tickets[0], timedOut)
	tk, err := hs.acquire("h:443")
	if err != nil {
		t.Fatal(err)
	}
	tickets[0] = tk
	_, err = hs.acquire("h:443")
	if retryIn := hostBusy(t, err); retryIn < 2*time.Second || retryIn >= 2*time.Second+200*time.Millisecond {
		t.Fatalf("RetryIn %s, want 8s/4 plus under a tenth", retryIn)
	}
	// Faster answers pull the estimate down, and with it the spacing of later turns.
	clock.Advance(3 * time.Second) // past the booked turn
	for i := range 2 {
		hs.release(tickets[i], answered)
	}
	_, err = hs.acquire("h:443")
	if err != nil {
		t.Fatal(err)
	}
	_, err = hs.acquire("h:443")
	if err != nil {
		t.Fatal(err)
	}
	_, err = hs.acquire("h:443")
	// Estimate: 8s, then 0.2*3s+0.8*8s = 7s, then 0.2*3.1s+0.8*7s = 6.22s; spacing 6.22s/4.
	want := time.Duration(0.2*float64(3100*time.Millisecond)+0.8*float64(7*time.Second)) / 4
	if retryIn := hostBusy(t, err); retryIn < want || retryIn >= want+want/10 {
		t.Fatalf("RetryIn %s, want in [%s, %s)", retryIn, want, want+want/10)
	}
}

func TestBreakerOpensOnTimeouts(t *testing.T) {
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
	if !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
	if class, _ := Classify(err); class != ClassCircuitOpen {
		t.Fatalf("class %q, want %q", class, ClassCircuitOpen)
	}
	if n := ln.accepted(t); n != 3 {
		t.Fatalf("accepted %d connections, want still 3", n)
	}
	if open, refused := metricValue(t, reg, "webhookd_egress_circuits_open"), metricValue(t, reg, "webhookd_egress_circuit_open_total"); open != 1 || refused != 1 {
		t.Fatalf("circuits_open %v, circuit_open_total %v; want 1, 1", open, refused)
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
	if n := ln.accepted(t); n != 4 {
		t.Fatalf("accepted %d connections, want 4 with the probe", n)
	}
	if _, err := c.Post(context.Background(), url, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after a failed probe: got %v, want ErrCircuitOpen", err)
	}
	if open := metricValue(t, reg, "webhookd_egress_circuits_open"); open != 1 {
		t.Fatalf("circuits_open %v, want 1", open)
	}
}

func TestBreakerOpensOnRefusedConnections(t *testing.T) {
	addr := closedPort(t)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, BreakerFailures: 2, Now: newFakeClock().Now})
	for i := range 2 {
		_, err := c.Post(context.Background(), hostURL(addr), testHeader, nil)
		if class, _ := Classify(err); class != ClassRefused {
			t.Fatalf("attempt %d: got %v, want refused", i+1, err)
		}
	}
	if _, err := c.Post(context.Background(), hostURL(addr), testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
}

func TestBreakerProbeAnsweredClosesIt(t *testing.T) {
	x, xSrv, ln := newHoldingServer(t)
	xURL := xSrv.URL
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	const cooldown = 30 * time.Second
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, xSrv), Timeout: 200 * time.Millisecond,
		BreakerFailures: 2, BreakerCooldown: cooldown, Now: clock.Now, Registerer: reg,
	})
	// Two requests that get no answer in time open the breaker.
	for range 2 {
		_, err := c.Post(context.Background(), xURL+"/hang", testHeader, nil)
		if class, _ := Classify(err); class != ClassTimeout {
			t.Fatalf("got %v, want a timeout", err)
		}
	}
	if _, err := c.Post(context.Background(), xURL, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
	clock.Advance(cooldown)

	// The probe is held by the server; meanwhile everyone else still fails fast.
	probe := goPost(c, xURL)
	x.waitArrivals(t, 1)
	before := ln.accepted(t)
	if _, err := c.Post(context.Background(), xURL, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("during the probe: got %v, want ErrCircuitOpen", err)
	}
	if n := ln.accepted(t); n != before {
		t.Fatalf("accepted %d connections during the probe, want %d", n, before)
	}

	// Any HTTP answer closes the breaker, a 500 included.
	x.release <- http.StatusInternalServerError
	if r := <-probe; r.err != nil || r.resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("probe: %v, %v", r.resp, r.err)
	}
	if open := metricValue(t, reg, "webhookd_egress_circuits_open"); open != 0 {
		t.Fatalf("circuits_open %v, want 0", open)
	}
	next := goPost(c, xURL)
	x.waitArrivals(t, 1)
	x.release <- http.StatusOK
	if r := <-next; r.err != nil || r.resp.StatusCode != http.StatusOK {
		t.Fatalf("after the probe: %v, %v", r.resp, r.err)
	}
}

func TestBreakerIgnoresHTTPErrorsAndBlockedAddresses(t *testing.T) {
	var requests atomic.Int32
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	})
	roots := trust(t, srv)
	allow := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: roots, BreakerFailures: 2})
	for i := range 5 {
		resp, err := allow.Post(context.Background(), srv.URL, testHeader, nil)
		if err != nil || resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("attempt %d: %v, %v; want the 500", i+1, resp, err)
		}
	}
	if n := requests.Load(); n != 5 {
		t.Fatalf("server saw %d requests, want 5", n)
	}

	strict := newClient(t, Options{RootCAs: roots, BreakerFailures: 2})
	for i := range 5 {
		if _, err := strict.Post(context.Background(), srv.URL, testHeader, nil); !errors.Is(err, ErrBlockedAddress) {
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

// metricValue reads one unlabelled counter or gauge from reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		m := f.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestBreakerCountsFailuresInARow(t *testing.T) {
	x, xSrv, _ := newHoldingServer(t)
	c := newClient(t, Options{
		Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, xSrv), Timeout: 200 * time.Millisecond,
		BreakerFailures: 2, Now: newFakeClock().Now,
	})
	hang := func() {
		t.Helper()
		resp, err := c.Post(context.Background(), xSrv.URL+"/hang", testHeader, nil)
		if class, _ := Classify(err); class != ClassTimeout {
			t.Fatalf("got %+v, %v; want a timeout", resp, err)
		}
	}
	answer := func(status int) {
		t.Helper()
		result := goPost(c, xSrv.URL)
		select {
		case <-x.arrived:
		case r := <-result:
			t.Fatalf("refused before reaching the server: %v", r.err)
		}
		x.release <- status
		if r := <-result; r.err != nil || r.resp.StatusCode != status {
			t.Fatalf("got %v, %v; want %d", r.resp, r.err, status)
		}
	}

	// An answer, whatever its status, breaks the run of failures.
	hang()
	answer(http.StatusServiceUnavailable)
	hang()
	answer(http.StatusOK)
	hang()
	hang()
	if _, err := c.Post(context.Background(), xSrv.URL, testHeader, nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after two failures in a row: got %v, want ErrCircuitOpen", err)
	}
}
