// Package egress is everything that leaves the worker toward a receiver: which addresses may be
// dialed (AddressPolicy), the one outbound HTTP client (Client), how much of a reply is read, how
// many exchanges one receiver host may hold at once, when to stop trying a host that keeps failing
// (a per-host circuit breaker), and how a failure is named for the webhook's owner (Classify).
//
// The per-host state (breakers, concurrency slots, duration estimates) lives in memory in each
// worker process and is never shared or persisted. Losing it on a restart, or splitting it across
// workers, only costs some wasted attempts against a host that is down; it never loses a delivery,
// because a refused attempt is retried like any other failed one.
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
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 30 * time.Second
	DefaultMaxWait         = time.Minute
)

// Options configures a Client. Zero values take the defaults above; Timeout is required.
type Options struct {
	Policy AddressPolicy
	// RootCAs verifies receivers' certificates; nil means the system pool. Build it with RootCAs.
	RootCAs *x509.CertPool
	// Timeout bounds one exchange: dial, TLS, request, response headers and body.
	Timeout time.Duration
	// HostConcurrency is how many exchanges with one receiver host may be in flight in this
	// process; more are refused with a HostBusyError.
	HostConcurrency int
	// BreakerFailures is how many counted failures in a row (timeouts, connection failures) open
	// a host's breaker.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker fails fast before it lets one probe through.
	BreakerCooldown time.Duration
	// MaxWait bounds the RetryIn of a HostBusyError.
	MaxWait    time.Duration
	Registerer prometheus.Registerer // nil: no metrics
	Logger     *slog.Logger          // nil: no logs; otherwise breakers opening and closing
	Now        func() time.Time      // nil: time.Now; a test clock for breakers and appointments
}

// Client is the one outbound HTTP client of a worker process. Build it with New and share it: its
// per-host limits only hold if every delivery goes through the same Client.
type Client struct {
	http    *http.Client
	timeout time.Duration
	hosts   *hosts
}

// Response is a receiver's reply. Body holds at most MaxResponseRead bytes.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// New builds a Client. Its transport keeps connections alive, never uses a proxy (a proxy would
// dial for us and bypass the address check), refuses blocked addresses at dial time after DNS
// resolution (so a name that rebinds to 127.0.0.1 after registration still gets nothing), never
// follows redirects, and always verifies TLS.
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
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: o.Policy.DialControl}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
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
	return &Client{
		http: &http.Client{
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		timeout: o.Timeout,
		hosts:   newHosts(o, m),
	}, nil
}

func (o Options) withDefaults() Options {
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = DefaultHostConcurrency
	}
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

// Post sends body to rawURL with header and returns the reply.
//
// Before connecting it asks the receiver's host (scheme's default port filled in, so each port is
// a host of its own) for permission: an open breaker fails fast with an error wrapping
// ErrCircuitOpen, and a host already holding HostConcurrency exchanges refuses with a
// *HostBusyError. Neither opens a connection.
//
// A reply whose body does not finish within the timeout returns both the Response (status,
// headers and what was read) and the error.
func (c *Client) Post(ctx context.Context, rawURL string, header http.Header, body []byte) (*Response, error) {
	return c.PostWithin(ctx, 0, rawURL, header, body)
}

// PostWithin is Post with the exchange bounded by timeout instead of the client's Timeout, which
// stays the ceiling: a timeout of zero, or longer than the client's, takes the client's. The
// delivery activity passes the attempt timeout frozen in its workflow's input, so the exchange
// always ends before the activity's own StartToClose, whatever this worker's configuration says.
func (c *Client) PostWithin(ctx context.Context, timeout time.Duration, rawURL string, header http.Header, body []byte) (*Response, error) {
	if timeout <= 0 || timeout > c.timeout {
		timeout = c.timeout
	}
	key, err := hostKey(rawURL)
	if err != nil {
		return nil, err
	}
	ticket, err := c.hosts.acquire(key)
	if err != nil {
		return nil, err
	}
	resp, err := c.exchange(ctx, timeout, rawURL, header, body)
	c.hosts.release(ticket, judge(ctx, err))
	return resp, err
}

func (c *Client) exchange(ctx context.Context, timeout time.Duration, rawURL string, header http.Header, body []byte) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if header != nil {
		req.Header = header.Clone()
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
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
