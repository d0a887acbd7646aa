package egress

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// countingListener counts the connections a server accepts, so a test can prove that a refused
// exchange never reached it.
type countingListener struct {
	net.Listener
	mu      sync.Mutex
	remotes []string // remote addresses, in accept order
	markers map[string]bool
	arrived chan struct{}
}

func newCountingListener(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &countingListener{Listener: ln, markers: map[string]bool{}, arrived: make(chan struct{}, 1)}
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.remotes = append(l.remotes, c.RemoteAddr().String())
	l.mu.Unlock()
	select {
	case l.arrived <- struct{}{}:
	default:
	}
	return c, nil
}

// accepted returns how many connections, other than its own markers, reached the server so far.
// A listener accepts connections in the order their handshakes completed, and a client's dial
// completes before its Post returns; so once a marker dialed now has been accepted, every earlier
// connection has been counted.
func (l *countingListener) accepted(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	marker := c.LocalAddr().String()
	_ = c.Close()
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		if i := slices.Index(l.remotes, marker); i >= 0 {
			l.markers[marker] = true
			n := 0
			for _, r := range l.remotes[:i] {
				if !l.markers[r] {
					n++
				}
			}
			l.mu.Unlock()
			return n
		}
		l.mu.Unlock()
		select {
		case <-l.arrived:
		case <-deadline:
			t.Fatal("marker connection was never accepted")
		}
	}
}

// newTLSServer starts an HTTPS server on a counting listener. Every server gets its own port, so
// each is a host of its own for the Client.
func newTLSServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *countingListener) {
	t.Helper()
	ln := newCountingListener(t)
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	// Marker connections close without a TLS handshake; their complaints are noise.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ln
}

// hangingListener accepts TCP connections and never answers, like a receiver that is overloaded
// or a firewall that swallows packets after the handshake.
func hangingListener(t *testing.T) *countingListener {
	t.Helper()
	ln := newCountingListener(t)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln
}

// closedPort returns an address where nothing listens, so connecting is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// trustFile writes the httptest certificate (shared by all httptest TLS servers) to a PEM file.
func trustFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// trust returns roots that verify httptest servers, read through RootCAs as production does.
func trust(t *testing.T, srv *httptest.Server) *x509.CertPool {
	t.Helper()
	roots, err := RootCAs(trustFile(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	return roots
}

// fakeClock is the Client's clock in tests: breakers and appointments move only when the test
// says so.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hostURL(addr string) string { return "https://" + addr + "/hook" }
