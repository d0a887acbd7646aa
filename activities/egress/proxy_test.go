package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// connectProxy is a small CONNECT proxy: it records every CONNECT target, can require
// Proxy-Authorization, and opens tunnels to loopback targets only (anything else gets 502, so no
// test reaches the internet).
type connectProxy struct {
	ln     net.Listener
	scheme string
	auth   string // the Proxy-Authorization it requires; "" for none
	// answer, when set, is the status it answers every CONNECT with, without dialing; deny, the
	// status it answers for some targets (its rules); hang, the targets it never answers for (an
	// upstream that does not answer, waited on longer than the client waits).
	answer int
	deny   map[string]int
	hang   map[string]bool

	mu       sync.Mutex
	accepted int
	targets  []string
	// outbound are the local addresses of its tunnels' connections to the targets.
	outbound map[string]bool
	// open are the connections of its tunnels, closed when the test ends: a client keeps them.
	open []net.Conn
	wg   sync.WaitGroup
}

func newConnectProxy(t *testing.T, user, pass string) *connectProxy {
	t.Helper()
	return newConnectProxyTLS(t, user, pass, nil)
}

// newConnectProxyTLS is a connectProxy that speaks TLS with config (nil: none).
func newConnectProxyTLS(t *testing.T, user, pass string, config *tls.Config) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln, outbound: map[string]bool{}, scheme: "http"}
	if config != nil {
		p.ln, p.scheme = tls.NewListener(ln, config), "https"
	}
	if user != "" {
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.open {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// url is the proxy's URL with userinfo (nil: none).
func (p *connectProxy) url(userinfo *url.Userinfo) *url.URL {
	return &url.URL{Scheme: p.scheme, Host: p.ln.Addr().String(), User: userinfo}
}

func (p *connectProxy) seen() (accepted int, targets []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, append([]string(nil), p.targets...)
}

func (p *connectProxy) isOutbound(remote string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outbound[remote]
}

func (p *connectProxy) serve() {
	defer p.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.open = append(p.open, c)
		p.mu.Unlock()
		conns.Add(1)
		go func() {
			defer conns.Done()
			p.handle(c)
		}()
	}
}

func (p *connectProxy) handle(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	if p.auth != "" && req.Header.Get("Proxy-Authorization") != p.auth {
		_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n\r\n")
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, req.RequestURI)
	answer := p.answer
	if denied := p.deny[req.RequestURI]; denied != 0 {
		answer = denied
	}
	hang := p.hang[req.RequestURI]
	p.mu.Unlock()
	if hang {
		_, _ = io.Copy(io.Discard, br) // until the client gives up
		return
	}
	if answer != 0 {
		_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n\r\n", answer, http.StatusText(answer))
		return
	}
	ap, err := netip.ParseAddrPort(req.RequestURI)
	if err != nil || !ap.Addr().IsLoopback() {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", req.RequestURI)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	p.mu.Lock()
	p.outbound[up.LocalAddr().String()] = true
	p.open = append(p.open, up)
	p.mu.Unlock()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// newH2Server is an HTTPS receiver offering HTTP/2, which records each request's remote address,
// SNI, Host and protocol.
type receivedRequest struct{ remote, sni, host, proto string }

func newH2Server(t *testing.T, status int) (*httptest.Server, func() []receivedRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []receivedRequest
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, receivedRequest{remote: r.RemoteAddr, sni: r.TLS.ServerName, host: r.Host, proto: r.Proto})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, func() []receivedRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]receivedRequest(nil), got...)
	}
}

func port(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// TestProxyDelivers: deliveries go through the proxy, which is asked for the receiver's checked IP
// and port, never its name; TLS through the tunnel names the receiver in SNI and is verified, the
// receiver sees its name in Host and gets HTTP/2; the tunnel is kept alive across deliveries.
func TestProxyDelivers(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusNoContent)
	// httptest's certificate is valid for example.com: the name resolves to the receiver here.
	resolver := startTestDNS(t, map[string][]string{"example.com": {"127.0.0.1"}})
	proxy := newConnectProxy(t, "webhookd", "hunter2")
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Resolver: resolver,
		Proxy: proxy.url(url.UserPassword("webhookd", "hunter2"))})

	p := port(t, srv.URL)
	target := "https://example.com:" + p + "/hook"
	for i := range 3 {
		resp, err := c.Post(context.Background(), target, testHeader, []byte(`{}`))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delivery %d: %v, %v", i, resp, err)
		}
	}
	_, targets := proxy.seen()
	if len(targets) != 1 || targets[0] != "127.0.0.1:"+p {
		t.Fatalf("CONNECT targets %q, want one to 127.0.0.1:%s (the checked IP, kept alive)", targets, p)
	}
	got := requests()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	for _, r := range got {
		if !proxy.isOutbound(r.remote) || r.sni != "example.com" || r.host != "example.com:"+p || r.proto != "HTTP/2.0" {
			t.Fatalf("request %+v: want it from the proxy, SNI and Host example.com, HTTP/2", r)
		}
	}
}

// TestProxyNextAddress: when the proxy cannot reach one of the receiver's addresses, the next is
// asked for, as a direct dial moves on from a refused one.
func TestProxyNextAddress(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	// Nothing listens on 127.0.0.2 at the receiver's port: the proxy answers 502 for it.
	resolver := startTestDNS(t, map[string][]string{"example.com": {"127.0.0.2", "127.0.0.1"}})
	proxy := newConnectProxy(t, "", "")
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Resolver: resolver, Proxy: proxy.url(nil)})
	p := port(t, srv.URL)
	if _, err := c.Post(context.Background(), "https://example.com:"+p+"/hook", testHeader, nil); err != nil {
		t.Fatal(err)
	}
	_, targets := proxy.seen()
	if len(requests()) != 1 || len(targets) == 0 || targets[len(targets)-1] != "127.0.0.1:"+p {
		t.Fatalf("CONNECTs %q, %d requests: want the last CONNECT to 127.0.0.1:%s and one request", targets, len(requests()), p)
	}
}

// TestProxyOverTLS: an https:// proxy is spoken to over verified TLS, and the receiver's TLS runs
// inside it.
func TestProxyOverTLS(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	config := srv.TLS.Clone() // httptest's certificate, valid for 127.0.0.1
	config.NextProtos = nil
	proxy := newConnectProxyTLS(t, "webhookd", "hunter2", config)
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Proxy: proxy.url(url.UserPassword("webhookd", "hunter2"))})
	if _, err := c.Post(context.Background(), srv.URL, testHeader, nil); err != nil {
		t.Fatal(err)
	}
	if _, targets := proxy.seen(); len(targets) != 1 || len(requests()) != 1 || !proxy.isOutbound(requests()[0].remote) {
		t.Fatalf("CONNECTs %q, requests %+v: want one of each, through the proxy", targets, requests())
	}
	// Without the proxy's root, its TLS fails, and that is the proxy's failure.
	c = newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: x509.NewCertPool(), Proxy: proxy.url(nil)})
	_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
	var held *HeldError
	if !errors.As(err, &held) || held.Reason != HeldByProxy {
		t.Fatalf("untrusted proxy: %v, want the exchange held by the proxy", err)
	}
	if class, msg := Classify(held.Cause); class != ClassProxy || !strings.Contains(msg, "TLS") {
		t.Fatalf("untrusted proxy: %v (class %q, %q), want class %q naming TLS", held.Cause, class, msg, ClassProxy)
	}
}

// TestProxyVerifiesReceiverTLS: the tunnel changes nothing about the receiver's certificate: one
// that does not name the receiver fails as the receiver's TLS, after a CONNECT.
func TestProxyVerifiesReceiverTLS(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	resolver := startTestDNS(t, map[string][]string{"wrong-name.example.test": {"127.0.0.1"}})
	proxy := newConnectProxy(t, "", "")
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Resolver: resolver, Proxy: proxy.url(nil)})

	_, err := c.Post(context.Background(), "https://wrong-name.example.test:"+port(t, srv.URL)+"/hook", testHeader, nil)
	if class, msg := Classify(err); class != ClassTLS {
		t.Fatalf("got %v (class %q, %q), want %q", err, class, msg, ClassTLS)
	}
	if _, targets := proxy.seen(); len(targets) != 1 || len(requests()) != 0 {
		t.Fatalf("CONNECTs %q, requests %d: want one CONNECT and no request", targets, len(requests()))
	}
}

// rebindingResolver answers from first until rebind is called, then from second: a name that
// resolved to a public address when it was registered and to an internal one at delivery.
type rebindingResolver struct {
	*net.Resolver
	rebound atomic.Bool
}

func newRebindingResolver(first, second *net.Resolver) *rebindingResolver {
	r := &rebindingResolver{}
	r.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		if r.rebound.Load() {
			return second.Dial(ctx, network, address)
		}
		return first.Dial(ctx, network, address)
	}}
	return r
}

// TestProxySSRF: with the production policy, a receiver on an internal address, literal or behind
// a name (one that rebinds after its registration check included), is refused before anything is
// asked of the proxy; a public one is asked of the proxy by its IP, so the battery can fail.
func TestProxySSRF(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	p := port(t, srv.URL)
	records := map[string][]string{
		"loopback.example.test": {"127.0.0.1"},
		"v6loop.example.test":   {"::1"},
		"private.example.test":  {"10.0.0.5"},
		"metadata.example.test": {"169.254.169.254"},
		"mapped.example.test":   {"::ffff:127.0.0.1"},
		"allbad.example.test":   {"10.0.0.5", "127.0.0.1"},
		"public.example.test":   {"93.184.216.34"},
		"rebind.example.test":   {"93.184.216.34"},
	}
	rebound := map[string][]string{"rebind.example.test": {"127.0.0.1"}, "public.example.test": {"93.184.216.34"}}
	resolver := newRebindingResolver(startTestDNS(t, records), startTestDNS(t, rebound))
	proxy := newConnectProxy(t, "", "")
	c := newClient(t, Options{RootCAs: trust(t, srv), Resolver: resolver.Resolver, Proxy: proxy.url(nil)})

	for _, host := range []string{
		"127.0.0.1:" + p, "[::1]:" + p, "10.0.0.5:" + p, "169.254.169.254", "[::ffff:127.0.0.1]:" + p,
		"loopback.example.test:" + p, "v6loop.example.test:" + p, "private.example.test", "metadata.example.test",
		"mapped.example.test:" + p, "allbad.example.test:" + p,
	} {
		_, err := c.Post(context.Background(), "https://"+host+"/hook", testHeader, nil)
		if class, _ := Classify(err); !errors.Is(err, ErrBlockedAddress) || class != ClassBlocked {
			t.Errorf("%s: got %v (class %q), want a blocked address", host, err, class)
		}
	}
	// Registration saw a public address; at delivery the name answers loopback.
	rebind := "https://rebind.example.test:" + p + "/hook"
	if err := (AddressPolicy{}).CheckURL(context.Background(), rebind, resolver.Resolver); err != nil {
		t.Fatalf("CheckURL before the rebinding: %v", err)
	}
	resolver.rebound.Store(true)
	if _, err := c.Post(context.Background(), rebind, testHeader, nil); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("rebound name: got %v, want a blocked address", err)
	}
	if accepted, targets := proxy.seen(); accepted != 0 || len(requests()) != 0 {
		t.Fatalf("the proxy accepted %d connections (CONNECT %q) and the receiver got %d requests; want none", accepted, targets, len(requests()))
	}

	// The control: a public address is asked of the proxy, by IP, and the proxy's 502 is its own.
	_, err := c.Post(context.Background(), "https://public.example.test/hook", testHeader, nil)
	if class, _ := Classify(err); class != ClassProxyUpstream {
		t.Fatalf("public receiver: got %v (class %q), want %q", err, class, ClassProxyUpstream)
	}
	if _, targets := proxy.seen(); len(targets) != 1 || targets[0] != "93.184.216.34:443" {
		t.Fatalf("CONNECT targets %q, want 93.184.216.34:443", targets)
	}
}

// TestProxyFailuresAreNamed: a failure of the proxy is the proxy's (class proxy, or
// proxy_upstream when it says it could not reach the receiver) and counts against no breaker; an
// outage of the proxy holds the exchange, with the failure as its cause (TestProxyOutageHolds); a
// failure of the receiver behind an open tunnel is the receiver's. No error names the
// credentials.
func TestProxyFailuresAreNamed(t *testing.T) {
	srv, _ := newH2Server(t, http.StatusOK)
	receiver := srv.Listener.Addr().String()
	authProxy := newConnectProxy(t, "webhookd", "hunter2")
	open := newConnectProxy(t, "", "")
	refusing := newConnectProxy(t, "", "")
	refusing.answer = http.StatusForbidden
	hanging := hangingListener(t)
	hangingReceiver := hangingListener(t)
	closing := closingListener(t)
	deadProxy := &url.URL{Scheme: "http", Host: closedPort(t), User: url.UserPassword("webhookd", "hunter2")}
	tlsToPlain := open.url(url.UserPassword("webhookd", "hunter2"))
	tlsToPlain.Scheme = "https"

	for _, c := range []struct {
		name, url string
		proxy     *url.URL
		timeout   time.Duration
		want      string
		held      bool
	}{
		// An outage of the proxy holds the exchange (held); its answers about one receiver fail it.
		{"wrong credentials", srv.URL, authProxy.url(url.UserPassword("webhookd", "hunter2-wrong")), 0, ClassProxy, true},
		{"no credentials", srv.URL, authProxy.url(nil), 0, ClassProxy, true},
		{"CONNECT forbidden", srv.URL, refusing.url(url.UserPassword("webhookd", "hunter2")), 0, ClassProxy, false},
		{"proxy down", srv.URL, deadProxy, 0, ClassProxy, true},
		{"proxy's TLS fails", srv.URL, tlsToPlain, 0, ClassProxy, true},
		{"proxy never answers CONNECT", srv.URL, &url.URL{Scheme: "http", Host: hanging.Addr().String(), User: url.UserPassword("webhookd", "hunter2")}, 500 * time.Millisecond, ClassProxy, false},
		{"receiver refuses: the proxy says so", hostURL(closedPort(t)), authProxy.url(url.UserPassword("webhookd", "hunter2")), 0, ClassProxyUpstream, false},
		{"receiver hangs behind the tunnel", hostURL(hangingReceiver.Addr().String()), authProxy.url(url.UserPassword("webhookd", "hunter2")), 500 * time.Millisecond, ClassTimeout, false},
		{"receiver closes behind the tunnel", hostURL(closing), authProxy.url(url.UserPassword("webhookd", "hunter2")), 0, ClassNetwork, false},
		{"delivered", hostURL(receiver), authProxy.url(url.UserPassword("webhookd", "hunter2")), 0, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Proxy: c.proxy, Timeout: c.timeout})
			_, err := cl.Post(context.Background(), c.url, testHeader, nil)
			// A failure of the proxy itself holds the exchange, with the failure as its cause.
			var held *HeldError
			if isHeld := errors.As(err, &held); isHeld != c.held {
				t.Fatalf("got %v: held %v, want %v", err, isHeld, c.held)
			}
			if held != nil {
				if held.Reason != HeldByProxy || held.Cause == nil || held.RetryIn <= 0 {
					t.Fatalf("held %+v, want a hold by the proxy with its cause and an appointment", held)
				}
				err = held.Cause
			}
			class, msg := Classify(err)
			if class != c.want {
				t.Fatalf("got %v (class %q, %q), want class %q", err, class, msg, c.want)
			}
			if err == nil {
				return
			}
			b64 := base64.StdEncoding.EncodeToString([]byte("webhookd:hunter2"))
			for _, s := range []string{err.Error(), msg} {
				if strings.Contains(s, "hunter2") || strings.Contains(s, b64[:12]) {
					t.Fatalf("an error names the proxy's credentials: %s", s)
				}
			}
			// The owner's message does not name the operator's proxy.
			if strings.Contains(msg, c.proxy.Hostname()+":"+c.proxy.Port()) {
				t.Fatalf("the owner's message names the proxy: %s", msg)
			}
			isProxy := class == ClassProxy || class == ClassProxyUpstream
			if o := judge(context.Background(), nil, err); isProxy && o != neutral {
				t.Fatalf("a proxy failure judged %v, want neutral", o)
			}
		})
	}
}

// closingListener accepts connections and closes them at once: a receiver that breaks the
// connection. It returns the listener's address.
func closingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestProxyBreakers: proxy failures, however many, open neither the host's breaker nor the
// endpoint's: once the proxy works again, the next delivery goes through.
func TestProxyBreakers(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	proxy := newConnectProxy(t, "", "")
	proxy.answer = http.StatusBadGateway
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Proxy: proxy.url(nil), BreakerFailures: 2})
	for range 5 {
		if _, err := c.Post(context.Background(), srv.URL, testHeader, nil); err == nil {
			t.Fatal("the proxy's 502 was a success")
		}
	}
	proxy.mu.Lock()
	proxy.answer = 0
	proxy.mu.Unlock()
	if _, err := c.Post(context.Background(), srv.URL, testHeader, nil); err != nil {
		t.Fatalf("after 5 proxy failures with BreakerFailures 2: %v", err)
	}
	if n := len(requests()); n != 1 {
		t.Fatalf("receiver got %d requests, want 1", n)
	}
}

func TestCheckProxyURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://proxy:3128":             true,
		"https://u:p@proxy.example.com": true,
		"http://[::1]:3128/":            true,
		"socks5://proxy:1080":           false,
		"proxy:3128":                    false,
		"http://:3128":                  false,
		"http://proxy:3128/path":        false,
		"http://proxy:3128?x=1":         false,
		"http://proxy:99999":            false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckProxyURL(u); (err == nil) != ok {
			t.Errorf("CheckProxyURL(%s) = %v, want ok %v", raw, err, ok)
		}
	}
	if _, err := New(Options{Timeout: time.Second, Proxy: &url.URL{Scheme: "socks5", Host: "proxy:1080"}}); err == nil {
		t.Error("New accepted a socks5 proxy")
	}
	// The TLS config of an https proxy verifies the proxy's name.
	d, err := newProxyDialer(&url.URL{Scheme: "https", Host: "proxy.example.com"}, AddressPolicy{}, net.DefaultResolver, nil)
	if err != nil || d.proxy != "proxy.example.com:443" || d.tls == nil || d.tls.ServerName != "proxy.example.com" || d.tls.InsecureSkipVerify || d.tls.MinVersion != tls.VersionTLS12 {
		t.Fatalf("https proxy dialer %+v, %v", d, err)
	}
}

// TestProxyOutageHolds: an egress proxy that fails holds exchanges back instead of failing them
// (issue 41): the first failure turns the proxy down (webhookd_egress_proxy_up 0); while it is
// down, exchanges are held without a connection until its pause is over, then one probes it, and
// each failed probe doubles the pause; the first probe that gets through turns it up again and
// exchanges go on. Nothing reaches the receiver meanwhile, and no breaker counts the outage.
func TestProxyOutageHolds(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	proxy := newConnectProxy(t, "", "")
	proxy.answer = http.StatusProxyAuthRequired // refuses every tunnel: our credentials were revoked
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Proxy: proxy.url(nil),
		BreakerFailures: 1, Registerer: reg, Now: clock.Now})
	up := func() float64 { return testutil.ToFloat64(c.gate.metrics.proxyUpGauge) }
	if up() != 1 {
		t.Fatalf("webhookd_egress_proxy_up = %v before any exchange, want 1", up())
	}
	post := func() (*HeldError, error) {
		t.Helper()
		_, err := c.Post(context.Background(), srv.URL, testHeader, nil)
		var held *HeldError
		if errors.As(err, &held) {
			if held.Reason != HeldByProxy {
				t.Fatalf("held by %s, want %s", held.Reason, HeldByProxy)
			}
			return held, nil
		}
		return nil, err
	}

	held, err := post()
	if held == nil || held.Cause == nil {
		t.Fatalf("an exchange through a failing proxy: %v, want it held with the proxy's failure as cause", err)
	}
	if up() != 0 {
		t.Fatalf("webhookd_egress_proxy_up = %v after the failure, want 0", up())
	}
	for i := range 5 {
		held, err := post()
		if held == nil || held.Cause != nil || held.RetryIn < proxyPauseMin {
			t.Fatalf("exchange %d while the proxy is down: %+v, %v; want held without a connection, after the pause", i, held, err)
		}
	}
	if accepted, _ := proxy.seen(); accepted != 1 {
		t.Fatalf("the proxy got %d connections, want 1: exchanges held while it is down must not dial it", accepted)
	}

	// The pause is over: one probe, which fails again and doubles the pause.
	clock.Advance(proxyPauseMin)
	held, err = post()
	if held == nil || held.Cause == nil || held.RetryIn < 2*proxyPauseMin {
		t.Fatalf("the probe: %+v, %v; want held by the proxy's failure, with the pause doubled", held, err)
	}
	if accepted, _ := proxy.seen(); accepted != 2 {
		t.Fatalf("the proxy got %d connections, want 2 (one probe)", accepted)
	}
	if held, _ := post(); held == nil {
		t.Fatal("an exchange right after the failed probe was not held")
	}

	// The proxy works again: the next probe gets through, and so does what follows.
	proxy.mu.Lock()
	proxy.answer = 0
	proxy.mu.Unlock()
	clock.Advance(2 * proxyPauseMin)
	for i := range 3 {
		if held, err := post(); held != nil || err != nil {
			t.Fatalf("exchange %d once the proxy works: held %+v, err %v", i, held, err)
		}
	}
	if up() != 1 {
		t.Fatalf("webhookd_egress_proxy_up = %v once the proxy works, want 1", up())
	}
	if got := testutil.ToFloat64(c.gate.metrics.proxyFailures); got != 2 {
		t.Fatalf("webhookd_egress_proxy_failures_total = %v, want 2", got)
	}
	if n := len(requests()); n != 3 {
		t.Fatalf("the receiver got %d requests, want 3", n)
	}
}

// TestProxyFailuresOfOneDestinationHoldNoOther: what the proxy does for one destination is that
// exchange's failure, never the proxy's outage: a 403 from its rules for one receiver, or a
// CONNECT it leaves unanswered while it waits on an unresponsive receiver, fail those exchanges
// (class proxy, as before) and hold nobody else's: the next exchange, to another receiver, goes
// through. Otherwise one account's receiver could hold every account's deliveries.
func TestProxyFailuresOfOneDestinationHoldNoOther(t *testing.T) {
	srv, requests := newH2Server(t, http.StatusOK)
	hanging := hangingListener(t)
	denied := closingListener(t)
	proxy := newConnectProxy(t, "", "")
	proxy.deny = map[string]int{denied: http.StatusForbidden}
	proxy.hang = map[string]bool{hanging.Addr().String(): true}
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: trust(t, srv), Proxy: proxy.url(nil), Timeout: 500 * time.Millisecond})
	for _, target := range []string{denied, hanging.Addr().String()} {
		_, err := c.Post(context.Background(), hostURL(target), testHeader, nil)
		var held *HeldError
		if errors.As(err, &held) {
			t.Fatalf("CONNECT %s: held (%v), want the exchange's own failure", target, err)
		}
		if class, _ := Classify(err); class != ClassProxy && class != ClassProxyUpstream {
			t.Fatalf("CONNECT %s: %v (class %q), want a failure named the proxy's", target, err, class)
		}
	}
	if _, err := c.Post(context.Background(), srv.URL, testHeader, nil); err != nil {
		t.Fatalf("another receiver after those failures: %v, want it delivered", err)
	}
	if n := len(requests()); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1", n)
	}
}
