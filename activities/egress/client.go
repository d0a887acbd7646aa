// Package egress is everything that leaves the worker toward a receiver: which addresses may be
// dialed (AddressPolicy), the one outbound HTTP client (Client), how much of a reply is read, how
// many exchanges one receiver host and one endpoint may hold at once and how a busy host's slots
// are shared across accounts, an endpoint's rate limit, when to stop trying an endpoint or a host
// that keeps failing (circuit breakers), and how a failure is named for the webhook's owner
// (Classify).
//
// That state (breakers, slots, waiters, rate schedules, duration estimates) lives in memory in each
// worker process and is never shared or persisted. Losing it on a restart, or splitting it across
// workers, only loosens the limits (N workers allow N times each cap) or costs some wasted
// attempts against a receiver that is down; it never loses a delivery, because a held exchange is
// retried like any other.
package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxResponseRead bounds what is read of a receiver's reply: its headers (larger ones fail with
// ClassResponseTooLarge) and, separately, its body (the rest is discarded unread). A receiver
// chooses what it sends back, so without a bound one reply could exhaust the worker's memory.
const MaxResponseRead = 64 << 10

// Defaults of the Options left at zero.
const (
	DefaultHostConcurrency = 16
	// DefaultEndpointConcurrency, a quarter of the host's default, lets no single endpoint take more
	// than a quarter of its host's slots.
	DefaultEndpointConcurrency = DefaultHostConcurrency / 4
	DefaultBreakerFailures     = 5
	DefaultBreakerCooldown     = 30 * time.Second
	DefaultMaxWait             = time.Minute
)

// Options configures a Client. Zero values take the defaults above; Timeout is required.
type Options struct {
	Policy AddressPolicy
	// Resolver resolves receivers' names, whose every address Policy checks; nil is
	// net.DefaultResolver.
	Resolver *net.Resolver
	// Proxy, when set, is an http:// or https:// CONNECT proxy that every exchange goes through,
	// with optional user:password@ sent as Proxy-Authorization Basic. The address rules stay
	// ours: the receiver's name is resolved and checked here and the proxy is asked for a tunnel
	// to the checked IP (see proxyDialer). The proxy's own address is the operator's and Policy
	// does not judge it.
	Proxy *url.URL
	// RootCAs verifies receivers' certificates; nil means the system pool. Build it with RootCAs.
	RootCAs *x509.CertPool
	// Timeout bounds one exchange: dial, TLS, request, response headers and body.
	Timeout time.Duration
	// HostConcurrency is how many exchanges with one receiver host may be in flight in this
	// process; more wait their turn, shared fairly across accounts, or are held back with a
	// *HeldError.
	HostConcurrency int
	// EndpointConcurrency is how many exchanges with one endpoint may be in flight in this
	// process, unless its Endpoint says otherwise; at most HostConcurrency. Zero takes a quarter
	// of HostConcurrency (at least 1).
	EndpointConcurrency int
	// BreakerFailures is how many counted failures in a row open a breaker: an endpoint's
	// (timeouts, broken connections, TLS handshakes) or a host's (refused connections, DNS).
	BreakerFailures int
	// BreakerCooldown is how long an open breaker fails fast before it lets one probe through.
	BreakerCooldown time.Duration
	// MaxWait bounds the RetryIn of an exchange held back while a breaker's probe is in flight.
	// Appointments for a slot or a rate-limit turn are not bounded: they are the turn itself.
	MaxWait    time.Duration
	Registerer prometheus.Registerer // nil: no metrics
	Logger     *slog.Logger          // nil: no logs; otherwise breakers opening and closing
	Now        func() time.Time      // nil: time.Now; a test clock for breakers and appointments
}

// Client is the one outbound HTTP client of a worker process. Build it with New and share it: its
// per-host limits only hold if every delivery goes through the same Client.
type Client struct {
	http *http.Client
	// proxy names the egress proxy (scheme and host, no credentials); "" without one.
	proxy   string
	timeout time.Duration
	hosts   *hosts
	// gate holds exchanges back while the egress proxy is down; nil without one.
	gate *proxyGate
	// tls holds the clients of webhooks with TLS settings of their own (tlsconfig.go).
	tls *tlsClients
	// dial opens every connection: the address policy's check at dial time, through the egress
	// proxy's tunnel where one is set.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Response is a receiver's reply. Body holds at most MaxResponseRead bytes.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// New builds a Client. Its transport keeps connections alive, never uses net/http's proxy support
// (it would send the proxy the receiver's name, and the proxy would resolve and dial it past the
// address check), refuses blocked addresses at dial time after DNS resolution (so a name that
// rebinds to 127.0.0.1 after registration still gets nothing), never follows redirects, and always
// verifies TLS. With Options.Proxy its dialer tunnels through the proxy to checked addresses only.
func New(o Options) (*Client, error) {
	if o.Timeout <= 0 {
		return nil, errors.New("egress: Timeout must be positive")
	}
	o = o.withDefaults()
	roots := o.RootCAs
	if roots == nil {
		var err error
		if roots, err = RootCAs(""); err != nil {
			return nil, err
		}
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	hs := newHosts(o, m)
	if err := m.registerEndpoints(o.Registerer, hs); err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: o.Policy.DialControl, Resolver: o.Resolver}
	dial := dialer.DialContext
	var proxyName string
	if o.Proxy != nil {
		resolver := o.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		pd, err := newProxyDialer(o.Proxy, o.Policy, resolver, roots)
		if err != nil {
			return nil, err
		}
		// Only the dial changes: the transport still speaks TLS to the receiver itself, through
		// the tunnel, with its name in SNI, and HTTP/2 when the receiver offers it.
		dial, proxyName = pd.DialContext, pd.name
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           512,
		MaxIdleConnsPerHost:    max(32, o.HostConcurrency),
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  0, // the per-exchange context bounds the whole exchange
		MaxResponseHeaderBytes: MaxResponseRead,
	}
	c := &Client{
		http:    &http.Client{Transport: transport, CheckRedirect: noRedirects},
		proxy:   proxyName,
		timeout: o.Timeout,
		hosts:   hs,
		tls:     newTLSClients(transport, roots),
		dial:    dial,
	}
	// The proxy's series are there without one too (up, no failures), so that dashboards and
	// alerts read the same names on every worker.
	if err := m.registerProxy(o.Registerer); err != nil {
		return nil, err
	}
	m.proxyUp(true)
	if o.Proxy != nil {
		c.gate = newProxyGate(proxyName, o, m)
	}
	return c, nil
}

func (o Options) withDefaults() Options {
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = DefaultHostConcurrency
	}
	if o.EndpointConcurrency <= 0 {
		o.EndpointConcurrency = max(1, o.HostConcurrency/4)
	}
	o.EndpointConcurrency = min(o.EndpointConcurrency, o.HostConcurrency)
	if o.BreakerFailures <= 0 {
		o.BreakerFailures = DefaultBreakerFailures
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = DefaultBreakerCooldown
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// RootCAs returns the system certificate pool (an empty one where the system has none) with the
// PEM certificates of extraCAFile added, for tests and private PKI. An empty extraCAFile adds
// nothing. It is the one reader of that file, so the delivery client and the mailer trust the same
// roots.
func RootCAs(extraCAFile string) (*x509.CertPool, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if extraCAFile == "" {
		return roots, nil
	}
	pem, err := os.ReadFile(extraCAFile)
	if err != nil {
		return nil, err
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate found", extraCAFile)
	}
	return roots, nil
}

// Endpoint names the webhook an exchange delivers for: whose slots it counts against, whose
// breaker judges it, and its own limits. The zero Endpoint is an anonymous one per URL.
type Endpoint struct {
	// Account owns the webhook: a busy host's free slots go to the account holding fewest.
	Account int64
	// Webhook is the endpoint; with the URL it keys the endpoint's breaker, cap and rate limit.
	Webhook int64
	// MaxInFlight caps its exchanges in flight; zero takes Options.EndpointConcurrency. Never
	// more than Options.HostConcurrency.
	MaxInFlight int
	// RateLimit caps its exchanges per second; zero is none.
	RateLimit int
	// RecheckRateLimit, when set, reads the endpoint's rate limit anew: exchanges waiting in this
	// process for a turn under RateLimit call it (one per endpoint, about once a second), so that a
	// limit changed meanwhile re-times them too. Zero: the limit was removed.
	RecheckRateLimit func(context.Context) (int, error)

	key string
}

// Request asks for a turn at a receiver.
type Request struct {
	URL      string
	Endpoint Endpoint
	// Timeout bounds the exchange; zero, or longer than the client's Timeout, takes the
	// client's, which stays the ceiling.
	Timeout time.Duration
	// Wait is how long the exchange may wait in this process for its turn (a slot, the rate
	// limit) before it is held back with a *HeldError; zero holds it back at once.
	Wait time.Duration
	// QuickWait, with Wait zero, lets the exchange wait up to this long, and only when its turn is
	// due within it by the host's estimate: a turn further out is held back at once. Such a wait
	// may join the line past the account's share of waiters, since its caller bounds how many wait
	// (a local attempt holds its workflow task meanwhile). It books no appointment unless it ends
	// held back, and then one.
	QuickWait time.Duration
	// Key names the exchange across its holds: held back with a *HeldError and asked for again
	// under the same Key, it redeems the turn booked for it (its rate-limit turn, its appointment
	// and its place in line) instead of booking another. A delivery's attempts use its id. Empty:
	// each ask is a stranger, whose bookings nobody keeps.
	Key string
	// TLS is the webhook's own TLS settings, nil for none: the exchange goes through a transport
	// built for them (tlsconfig.go) instead of the shared one.
	TLS *ReceiverTLS
	// Host, when set, is the receiver's host:port for a URL that is not an HTTP one (a broker's,
	// docs/destinations.md): its limits are that host's.
	Host string
}

// Turn is an exchange admitted by Take: Post makes it, and Cancel gives the turn back unused.
type Turn struct {
	c       *Client
	t       ticket
	http    *http.Client
	url     string
	timeout time.Duration
	done    bool
	// proxyProbe: this exchange probes the egress proxy, which is down (proxyGate).
	proxyProbe bool
}

// Post sends body to rawURL with header for an anonymous endpoint and returns the reply; it never
// waits for a turn.
func (c *Client) Post(ctx context.Context, rawURL string, header http.Header, body []byte) (*Response, error) {
	return c.Do(ctx, Request{URL: rawURL}, header, body)
}

// Do takes a turn for r and makes the exchange.
func (c *Client) Do(ctx context.Context, r Request, header http.Header, body []byte) (*Response, error) {
	turn, err := c.Take(ctx, r)
	if err != nil {
		return nil, err
	}
	return turn.Post(ctx, header, body)
}

// Take asks the receiver's host (scheme's default port filled in, so each port is a host of its
// own) and the endpoint for a turn, without connecting. An open breaker fails fast with an error
// wrapping ErrCircuitOpen, and an exchange that cannot have its turn within r.Wait (the host or the
// endpoint at its cap, the rate limit, a breaker's probe in flight) is held back with a
// *HeldError. Every Turn returned must be posted or canceled.
func (c *Client) Take(ctx context.Context, r Request) (*Turn, error) {
	timeout := r.Timeout
	if timeout <= 0 || timeout > c.timeout {
		timeout = c.timeout
	}
	key, err := r.Host, error(nil)
	if key == "" {
		key, err = hostKey(r.URL)
	}
	if err != nil {
		return nil, err
	}
	hc := c.http
	if r.TLS != nil {
		if hc, err = c.tls.get(r.Endpoint.Webhook, r.TLS); err != nil {
			return nil, err
		}
	}
	// The proxy first: while it is down, an exchange takes no slot at the receiver's host.
	probe, err := c.gate.admit()
	if err != nil {
		return nil, err
	}
	ep := r.Endpoint
	ep.key = fmt.Sprintf("%d %s", ep.Webhook, r.URL)
	t, err := c.hosts.acquire(ctx, key, ep, r.Wait, r.QuickWait, r.Key)
	if err != nil {
		c.gate.abandon(probe)
		return nil, err
	}
	return &Turn{c: c, t: t, http: hc, url: r.URL, timeout: timeout, proxyProbe: probe}, nil
}

// Post makes the exchange: body to the turn's URL with header. A reply whose body does not finish
// within the timeout returns both the Response (status, headers and what was read) and the error.
func (t *Turn) Post(ctx context.Context, header http.Header, body []byte) (*Response, error) {
	if t.done {
		return nil, errors.New("egress: turn already used")
	}
	t.done = true
	resp, err := t.c.exchange(ctx, t.http, t.timeout, t.url, header, body)
	t.c.hosts.release(ctx, t.t, resp, err)
	// A failure of the egress proxy itself comes back as a *HeldError: no receiver was reached.
	if err = t.c.gate.observe(ctx, t.proxyProbe, err); err != nil {
		var held *HeldError
		if errors.As(err, &held) {
			return nil, err
		}
	}
	return resp, err
}

// Answer is an error that is the receiver's answer, not a failure to reach it: a broker that
// refused a publish (activities/broker.Refusal). The breakers count it as an HTTP reply: Overloaded as a
// 503, otherwise as a 4xx, which says nothing against the host.
type Answer interface {
	error
	Overloaded() bool
}

// Run makes the turn's exchange with fn, for a receiver that is not an HTTP endpoint (a broker):
// fn runs under the exchange's timeout and its error judges the endpoint and its host as Post's
// does. An error that is an Answer is the receiver's reply. A failure of the egress proxy comes
// back as a *HeldError, as from Post.
func (t *Turn) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	if t.done {
		return errors.New("egress: turn already used")
	}
	t.done = true
	runCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var tunnel tunnelState
	if t.c.proxy != "" {
		runCtx = context.WithValue(runCtx, tunnelStateKey{}, &tunnel)
	}
	err := fn(runCtx)
	var resp *Response
	var answer Answer
	switch {
	case err == nil:
		resp = &Response{StatusCode: http.StatusOK}
	case errors.As(err, &answer):
		resp, err = &Response{StatusCode: http.StatusBadRequest}, nil
		if answer.Overloaded() {
			resp.StatusCode = http.StatusServiceUnavailable
		}
	default:
		err = tunnel.blame(t.c.proxy, err)
	}
	t.c.hosts.release(ctx, t.t, resp, err)
	if err = t.c.gate.observe(ctx, t.proxyProbe, err); err != nil {
		return err
	}
	if answer != nil {
		return answer
	}
	return nil
}

// Dial opens a connection to a receiver that is not an HTTP endpoint (a broker): the address
// policy judges every address at dial time, and the connection goes through the egress proxy's
// tunnel where one is set, as every exchange's does.
func (c *Client) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dial(ctx, network, addr)
}

// HTTP is the client of a receiver that speaks HTTPS through a library of its own (SQS): the
// shared transport, with its checks, and no redirects.
func (c *Client) HTTP() *http.Client { return c.http }

// Cancel gives back a turn that was not posted; after Post it does nothing.
func (t *Turn) Cancel() {
	if t == nil || t.done {
		return
	}
	t.done = true
	t.c.hosts.cancel(t.t)
	t.c.gate.abandon(t.proxyProbe)
}

// Timeout is the ceiling of one exchange.
func (c *Client) Timeout() time.Duration { return c.timeout }

func (c *Client) exchange(ctx context.Context, hc *http.Client, timeout time.Duration, rawURL string, header http.Header, body []byte) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var tunnel tunnelState
	if c.proxy != "" {
		ctx = context.WithValue(ctx, tunnelStateKey{}, &tunnel)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if header != nil {
		req.Header = header.Clone()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, tunnel.blame(c.proxy, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	out := &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: data}
	if err != nil {
		// The status line arrived but the body did not finish in time: the exchange failed.
		return out, err
	}
	return out, nil
}

// hostKey names the receiver host whose limits an exchange counts against: lowercased host and
// port, the scheme's default port filled in.
func hostKey(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		default:
			return "", fmt.Errorf("unsupported URL scheme %q", u.Scheme)
		}
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "", errors.New("URL has no host")
	}
	return net.JoinHostPort(host, port), nil
}
