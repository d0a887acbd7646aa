package egress

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testHeader = http.Header{"Content-Type": {"application/json"}}

func TestPostNeverFollowsRedirects(t *testing.T) {
	var requests atomic.Int32
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv)})

	resp, err := c.Post(context.Background(), srv.URL+"/hook", testHeader, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/elsewhere" {
		t.Fatalf("got %d, Location %q; want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestPostSendsHeaderAndBody(t *testing.T) {
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("X-Test") != "yes" || buf.String() != `{"a":1}` {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Answer", "42")
		_, _ = w.Write([]byte("thanks"))
	})
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv)})

	resp, err := c.Post(context.Background(), srv.URL, http.Header{"X-Test": {"yes"}}, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Answer") != "42" || string(resp.Body) != "thanks" {
		t.Fatalf("got %d %v %q", resp.StatusCode, resp.Header, resp.Body)
	}
}

func TestPostRefusesBlockedAddressAtDialTime(t *testing.T) {
	srv, ln := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c := newClient(t, Options{RootCAs: trust(t, srv)}) // the production policy

	_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
	if !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("got %v, want ErrBlockedAddress", err)
	}
	if class, _ := Classify(err); class != ClassBlocked {
		t.Fatalf("class %q, want %q", class, ClassBlocked)
	}
	if n := ln.accepted(t); n != 0 {
		t.Fatalf("server accepted %d connections, want 0", n)
	}
}

func TestPostVerifiesTLS(t *testing.T) {
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}}) // system roots only

	_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
	if class, msg := Classify(err); class != ClassTLS {
		t.Fatalf("got %v (class %q, %q), want class %q", err, class, msg, ClassTLS)
	}
}

func TestRootCAs(t *testing.T) {
	if roots, err := RootCAs(""); err != nil || roots == nil {
		t.Fatalf("RootCAs(\"\") = %v, %v", roots, err)
	}
	if _, err := RootCAs(filepath.Join(t.TempDir(), "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: got %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RootCAs(junk); err == nil {
		t.Fatal("a file without PEM certificates was accepted")
	}
}

func TestNewRequiresTimeout(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New accepted a zero Timeout")
	}
}

// hugeHeaders answers with a status line followed by about 10 MB of headers, written by hand
// because net/http would not send them. It reports how many bytes it managed to write and why it
// stopped.
type hugeHeaders struct {
	offered int
	results chan headerWrite
}

type headerWrite struct {
	written int
	err     error
}

func newHugeHeaders() *hugeHeaders {
	return &hugeHeaders{offered: 10 << 20, results: make(chan headerWrite, 64)}
}

func (h *hugeHeaders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		h.results <- headerWrite{err: err}
		return
	}
	defer conn.Close()
	// A small send buffer keeps the kernel from absorbing the whole reply: the writes must stop
	// when the client stops reading.
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetWriteBuffer(16 << 10)
		}
	}
	line := "X-Padding: " + strings.Repeat("a", 1000) + "\r\n"
	chunk := []byte(strings.Repeat(line, (64<<10)/len(line)))
	written, err := conn.Write([]byte("HTTP/1.1 200 OK\r\n"))
	for err == nil && written < h.offered {
		var n int
		n, err = conn.Write(chunk)
		written += n
	}
	h.results <- headerWrite{written: written, err: err}
}

func TestPostBoundsResponseHeaders(t *testing.T) {
	h := newHugeHeaders()
	srv, _ := newTLSServer(t, h.ServeHTTP)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv)})

	_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
	if class, msg := Classify(err); class != ClassResponseTooLarge {
		t.Fatalf("got %v (class %q, %q), want class %q", err, class, msg, ClassResponseTooLarge)
	}
	got := <-h.results
	if got.err == nil || got.written >= h.offered {
		t.Fatalf("server wrote %d of %d bytes (err %v): the client kept reading", got.written, h.offered, got.err)
	}
}

func TestPostBoundsMemoryOfHugeReplies(t *testing.T) {
	h := newHugeHeaders()
	srv, _ := newTLSServer(t, h.ServeHTTP)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), HostConcurrency: 32, EndpointConcurrency: 32})
	const exchanges = 20

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	errs := make(chan error, exchanges)
	for range exchanges {
		wg.Go(func() {
			_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
			errs <- err
		})
	}
	wg.Wait()
	for range exchanges {
		<-h.results
	}
	runtime.ReadMemStats(&after)
	close(errs)
	for err := range errs {
		if class, _ := Classify(err); class != ClassResponseTooLarge {
			t.Fatalf("got %v, want class %q", err, ClassResponseTooLarge)
		}
	}

	offered := uint64(exchanges * h.offered)
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > offered/4 {
		t.Fatalf("allocated %d bytes for %d bytes offered: replies are not bounded", allocated, offered)
	}
	t.Logf("allocated %d bytes for %d bytes offered", allocated, offered)
}

func TestPostReadsAtMost64KiBOfBody(t *testing.T) {
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("b"), 64<<10)
		for range 160 { // 10 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv)})

	resp, err := c.Post(context.Background(), srv.URL, testHeader, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.Body) != MaxResponseRead {
		t.Fatalf("got %d with %d body bytes, want 200 with %d", resp.StatusCode, len(resp.Body), MaxResponseRead)
	}
}

func TestHostKey(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"https://Example.COM/hook", "example.com:443"},
		{"https://example.com./hook", "example.com:443"},
		{"http://example.com/hook", "example.com:80"},
		{"HTTPS://example.com:8443/hook", "example.com:8443"},
		{"https://127.0.0.1:1234", "127.0.0.1:1234"},
		{"https://127.0.0.1:1235", "127.0.0.1:1235"},
		{"https://[2001:db8::1]/hook", "[2001:db8::1]:443"},
		{"ftp://example.com/", ""},
		{"https:///hook", ""},
		{"://bad", ""},
	}
	for _, tt := range tests {
		got, err := hostKey(tt.url)
		if tt.want == "" {
			if err == nil {
				t.Errorf("hostKey(%q) = %q, want an error", tt.url, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("hostKey(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
}

// TestRequestTimeoutBoundsTheExchange: the request's timeout cuts an exchange shorter than the client's
// Timeout, and the client's Timeout stays the ceiling of a longer one.
func TestRequestTimeoutBoundsTheExchange(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newTLSServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	for _, tc := range []struct {
		name            string
		client, perCall time.Duration
	}{
		{"per-call shorter than the client's", 10 * time.Second, 200 * time.Millisecond},
		{"client's is the ceiling", 200 * time.Millisecond, 10 * time.Second},
		{"zero takes the client's", 200 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Timeout: tc.client})
			began := time.Now()
			_, err := c.Do(context.Background(), Request{URL: srv.URL, Timeout: tc.perCall}, testHeader, []byte(`{}`))
			if class, _ := Classify(err); class != ClassTimeout {
				t.Fatalf("err = %v (class %q), want a timeout", err, class)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("exchange took %v, want about 200ms", took)
			}
		})
	}
}
