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
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// ProxyError is a failure of the egress proxy itself, not of the receiver behind it: the proxy
// could not be reached, its TLS failed, it broke the connection or did not answer CONNECT in time,
// or it answered CONNECT with a status other than 2xx. It never holds the proxy's credentials.
type ProxyError struct {
	// Proxy is the proxy's scheme and host, without credentials.
	Proxy string
	// StatusCode is the proxy's answer to CONNECT, or zero when there was none.
	StatusCode int
	// Status is the answer's status line text ("407 Proxy Authentication Required").
	Status string
	Err    error
	// asked: the CONNECT had been sent when the exchange failed, so the proxy was there and
	// heard which receiver it was asked for.
	asked bool
}

func (e *ProxyError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("egress proxy %s answered CONNECT with %s", e.Proxy, e.Status)
	}
	return fmt.Sprintf("egress proxy %s: %v", e.Proxy, e.Err)
}

func (e *ProxyError) Unwrap() error { return e.Err }

// reason says what went wrong in a few words that name no address.
func (e *ProxyError) reason() string {
	var netErr net.Error
	var dnsErr *net.DNSError
	var recordErr tls.RecordHeaderError
	var certErr *tls.CertificateVerificationError
	switch {
	case e.StatusCode != 0:
		return "it answered CONNECT with " + e.Status
	case errors.Is(e.Err, context.DeadlineExceeded), errors.As(e.Err, &netErr) && netErr.Timeout():
		return "it did not open the tunnel in time"
	case errors.As(e.Err, &dnsErr):
		return "its name does not resolve"
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		return "it refused the connection"
	case errors.As(e.Err, &recordErr), errors.As(e.Err, &certErr):
		return "the TLS handshake with it failed"
	}
	return "the connection to it failed"
}

// outage says whether the failure is the proxy's whatever receiver it was asked for, so that
// every exchange through it would fail the same way: no connection to it, its TLS, a request it
// could not take, our credentials refused (407), or a connection it broke without an answer. Its
// answers about one receiver are not: a refusal by its rules (403 and the others), its word that
// the receiver is unreachable (502, 503, 504), or no answer in time while it waits on the receiver
// (a proxy that is there waits for the receiver's connection before it answers). Those fail that
// exchange alone, so that no account's receiver can make the proxy look down for every account.
func (e *ProxyError) outage() bool {
	var netErr net.Error
	switch {
	case e.StatusCode == http.StatusProxyAuthRequired:
		return true
	case e.StatusCode != 0:
		return false
	case !e.asked:
		return true
	case errors.Is(e.Err, context.DeadlineExceeded), errors.As(e.Err, &netErr) && netErr.Timeout():
		return false
	}
	return true
}

// upstream says whether the proxy answered that it could not reach the receiver (502, 503, 504)
// rather than that it refused us.
func (e *ProxyError) upstream() bool {
	switch e.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// CheckProxyURL says what is wrong with an egress proxy URL, or nil: it must be an absolute http
// or https URL naming a host, with nothing but an optional user:password@ and port besides. The
// error never quotes the URL, which may hold a password.
func CheckProxyURL(u *url.URL) error {
	switch {
	case u == nil:
		return errors.New("no proxy URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("the proxy URL must start with http:// or https://")
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("the proxy URL must name a host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return errors.New("the proxy URL must have no path, query or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("the proxy URL's port must be a number from 1 to 65535")
		}
	}
	return nil
}

// proxyDialer connects to receivers through a CONNECT proxy while keeping the address rules
// webhookd's: it resolves the receiver's name itself, checks every address with the policy, and
// asks the proxy for a tunnel to a checked IP, never to a name, so the proxy resolves nothing for
// us and a name that rebinds to an internal address between the check and the connection cannot
// exist. The transport then speaks TLS through the tunnel with the receiver's name in SNI and
// verifies its certificate, as without a proxy.
type proxyDialer struct {
	policy   AddressPolicy
	resolver *net.Resolver
	// dialer reaches the proxy: the operator's own address, which the receiver policy does not
	// judge.
	dialer *net.Dialer
	// proxy is host:port of the proxy, name its scheme and host for errors, auth the
	// Proxy-Authorization value ("" for none).
	proxy, name, auth string
	// tls is nil for an http:// proxy; for https:// it verifies the proxy's certificate.
	tls *tls.Config
}

func newProxyDialer(u *url.URL, policy AddressPolicy, resolver *net.Resolver, roots *x509.CertPool) (*proxyDialer, error) {
	if err := CheckProxyURL(u); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	d := &proxyDialer{
		policy: policy, resolver: resolver,
		dialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver},
		proxy:  net.JoinHostPort(u.Hostname(), port), name: u.Scheme + "://" + u.Host,
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		d.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	if u.Scheme == "https" {
		d.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	return d, nil
}

// DialContext is the transport's DialContext: addr is the receiver's host:port from the URL.
// Addresses are tried in the resolver's order as net.Dialer tries them: one the policy refuses is
// skipped (its refusal is returned if none is left), an allowed one is asked of the proxy, and the
// next is tried only when the proxy answered that it could not reach this one (as a refused
// connection moves net.Dialer on); any other failure of the proxy ends the dial.
func (d *proxyDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var refused, unreachable error
	for _, ip := range ips {
		target := net.JoinHostPort(ip.Unmap().String(), port)
		if err := d.policy.DialControl(network, target, nil); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		conn, err := d.connect(ctx, target)
		var pe *ProxyError
		if err == nil || !errors.As(err, &pe) || !pe.upstream() || ctx.Err() != nil {
			return conn, err
		}
		unreachable = err
	}
	if unreachable != nil {
		return nil, unreachable
	}
	if refused == nil {
		refused = &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return nil, &net.OpError{Op: "dial", Net: network, Err: refused}
}

// connect opens a tunnel to target (a checked ip:port) through the proxy.
func (d *proxyDialer) connect(ctx context.Context, target string) (_ net.Conn, err error) {
	fail := func(err error) error { return &ProxyError{Proxy: d.name, Err: err} }
	checked, err := netip.ParseAddrPort(target) // DialControl parsed it already
	if err != nil {
		return nil, err
	}
	ts, _ := ctx.Value(tunnelStateKey{}).(*tunnelState)
	if ts != nil {
		ts.Store(tunnelOpening)
		defer func() {
			var pe *ProxyError
			switch {
			case err == nil:
				ts.Store(tunnelOpen)
			case errors.As(err, &pe) && pe.asked:
				ts.Store(tunnelAskedFailed)
			default:
				ts.Store(tunnelFailed)
			}
		}()
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", d.proxy)
	if err != nil {
		return nil, fail(err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = conn.Close()
		}
	}()
	// The handshake and the CONNECT exchange end with the caller's context.
	raw := conn
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if d.tls != nil {
		tc := tls.Client(conn, d.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fail(err)
		}
		conn = tc
	}
	req := &http.Request{
		Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target,
		Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
	if d.auth != "" {
		req.Header.Set("Proxy-Authorization", d.auth)
	}
	if err := req.Write(conn); err != nil {
		return nil, fail(contextErr(ctx, err))
	}
	if ts != nil {
		ts.Store(tunnelAsked)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, &ProxyError{Proxy: d.name, Err: contextErr(ctx, err), asked: true}
	}
	// The body is never read: after a 2xx the bytes are the receiver's, and otherwise the
	// connection is closed.
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &ProxyError{Proxy: d.name, StatusCode: resp.StatusCode, Status: resp.Status, asked: true}
	}
	if !stop() {
		return nil, fail(ctx.Err())
	}
	ok = true
	tc := &tunnelConn{Conn: conn, r: conn, remote: net.TCPAddrFromAddrPort(checked)}
	if br.Buffered() > 0 {
		// The receiver spoke first (a server greeting): what the reader holds is its.
		tc.r = br
	}
	return tc, nil
}

// tunnelState is how far the proxy got with an exchange's tunnel. The transport answers a request
// whose time ran out while it dialed with the context's error alone, so without it a proxy that
// never answers CONNECT would pass for a receiver that timed out. A dial the transport started for
// another request is not this exchange's: its state stays tunnelUnknown.
type tunnelState struct{ atomic.Int32 }

type tunnelStateKey struct{}

const (
	tunnelUnknown int32 = iota
	tunnelOpening
	tunnelAsked // the CONNECT was sent; its answer is awaited
	tunnelOpen
	tunnelFailed
	tunnelAskedFailed // failed after the CONNECT was sent
)

// blame returns err as a *ProxyError when the exchange failed before its proxy opened the tunnel.
func (ts *tunnelState) blame(proxy string, err error) error {
	var pe *ProxyError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	s := ts.Load()
	if s != tunnelOpening && s != tunnelAsked && s != tunnelFailed && s != tunnelAskedFailed {
		return err
	}
	asked := s == tunnelAsked || s == tunnelAskedFailed
	// The request's URL stays outside, where Classify drops it: its query may hold a credential.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return &url.Error{Op: urlErr.Op, URL: urlErr.URL, Err: &ProxyError{Proxy: proxy, Err: fmt.Errorf("no tunnel in time: %w", urlErr.Err), asked: asked}}
	}
	return &ProxyError{Proxy: proxy, Err: fmt.Errorf("no tunnel in time: %w", err), asked: asked}
}

// contextErr prefers the context's error to the I/O error its deadline caused.
func contextErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// tunnelConn is a tunnel to the receiver. It reads first what was read past the proxy's answer,
// names the receiver's checked address as its remote end, and its errors name that address instead
// of the proxy's: the webhook's owner reads the receiver's failures (Classify), and the proxy's
// address is the operator's.
type tunnelConn struct {
	net.Conn
	r      io.Reader
	remote net.Addr
}

func (c *tunnelConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	return n, c.hide(err)
}

func (c *tunnelConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.hide(err)
}

func (c *tunnelConn) RemoteAddr() net.Addr { return c.remote }

func (c *tunnelConn) hide(err error) error {
	if op, ok := err.(*net.OpError); ok {
		hidden := *op
		hidden.Source, hidden.Addr = nil, c.remote
		return &hidden
	}
	return err
}

// RedactURL returns u as a string with its password replaced, for logs and errors.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Redacted()
}
