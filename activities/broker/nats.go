package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsDefaultPort is the NATS client port, for a URL that names none.
const natsDefaultPort = "4222"

// natsHandshakeTimeout bounds the NATS handshake (INFO, CONNECT, PING/PONG) when the Publish's
// context has no deadline; with one, the handshake ends with it.
const natsHandshakeTimeout = 10 * time.Second

// errNATSTLSClosed is a TLS server's closing of the connection right after the handshake.
var errNATSTLSClosed = errors.New("tls: the NATS server closed the connection after the TLS handshake: it requires a client certificate, or refused this one")

// errNATSClosed is what Publish returns after Close.
var errNATSClosed = errors.New("nats: the publisher is closed")

// natsPublisher publishes into a JetStream stream through one NATS connection, opened by the first
// Publish and opened again by the Publish after it broke. The connection never reconnects on its
// own (nats.NoReconnect): no goroutine of nats.go dials in the background, every dial goes through
// Target.Dial with the context of the Publish that needs it.
type natsPublisher struct {
	server  string // nats://host:port or tls://host:port, no user info
	subject string
	target  Target
	tls     *tls.Config // for tls:// only

	// lock is held while the session is read or (re)opened; a channel so that a Publish waiting
	// for another's connect gives up with its own context.
	lock    chan struct{}
	session *natsSession // nil before the first Publish and after a failure closed it
	closed  bool
}

// natsSession is one connection and its JetStream context.
type natsSession struct {
	nc *nats.Conn
	js jetstream.JetStream
	// raw is the connection Target.Dial opened, under nats.go's buffers and TLS: closing it ends
	// a write that a server no longer reading would hold past the Publish's deadline (nats.go
	// writes a large message under its own lock, bounded only by its one-minute flush timeout).
	raw net.Conn
	// denied is closed when the server reports a permissions violation on the connection (a
	// publish to the subject, or the subscription to the reply inbox, not allowed): a JetStream
	// publish then gets no answer, so the Publish waiting for it fails at once instead of at its
	// deadline. deniedErr is the server's text, which names the subject and no credential.
	denied     chan struct{}
	denyOnce   sync.Once
	deniedErr  error
	deniedLock sync.Mutex
}

// OpenNATS returns a Publisher into the JetStream stream that stores t.Settings.Subject on the NATS
// server of t.URL (nats://host:port, or tls://host:port for TLS), authenticated by
// t.Credentials.Username and Password, or by Token. It does not connect: the first Publish does.
func OpenNATS(_ context.Context, t Target) (Publisher, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, errors.New("nats: the URL does not parse")
	}
	if u.Scheme != "nats" && u.Scheme != "tls" {
		return nil, fmt.Errorf("nats: the URL's scheme is %q, not nats or tls", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("nats: the URL names no host")
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return nil, errors.New("nats: the URL carries a password; the destination's credentials hold it")
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, errors.New("nats: the URL has a path or a query; a NATS server's URL is scheme://host:port")
	}
	if t.Settings.Subject == "" {
		return nil, errors.New("nats: the destination names no subject")
	}
	if t.Dial == nil {
		return nil, errors.New("nats: the target has no Dial")
	}
	port := u.Port()
	if port == "" {
		port = natsDefaultPort
	}
	if t.Credentials.Username == "" && u.User != nil {
		t.Credentials.Username = u.User.Username()
	}
	p := &natsPublisher{
		server:  u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port),
		subject: t.Settings.Subject,
		target:  t,
		lock:    make(chan struct{}, 1),
	}
	if u.Scheme == "tls" {
		p.tls = brokerTLS(t, u.Hostname())
	}
	return p, nil
}

// Publish publishes m to the subject and returns once the stream acknowledged it (a PubAck, which
// the server sends after the message is stored). A duplicate under the same DedupID within the
// stream's duplicate window is acknowledged without being stored twice: that is a success.
func (p *natsPublisher) Publish(ctx context.Context, m Message) error {
	s, err := p.open(ctx)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: p.subject, Data: m.Body, Header: nats.Header{}}
	for name, value := range m.Headers {
		if natsReserved(name) {
			continue
		}
		msg.Header.Set(name, value) // NATS header names keep their case
	}
	var opts []jetstream.PublishOpt
	if m.DedupID != "" {
		opts = append(opts, jetstream.WithMsgID(m.DedupID))
	}
	// A permissions violation leaves the publish unanswered: end the wait when one arrives.
	pubCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-s.denied:
			cancel(errNATSDenied)
		case <-pubCtx.Done():
		}
	}()
	// At the deadline the connection is given up, as failed does after a timeout: closing it
	// under nats.go ends a write that blocks. A cancellation says nothing of the connection,
	// which other Publishes may be using.
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			_ = s.raw.Close()
		}
	})
	_, err = s.js.PublishMsg(pubCtx, msg, opts...)
	stop()
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(context.Cause(pubCtx), errNATSDenied):
		err = errNATSDenied
	case ctx.Err() != nil:
		// The deadline, whatever nats.go saw when the connection was closed under it.
		err = fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return p.failed(s, err)
}

// natsReserved says whether a header name is JetStream's (Nats-Msg-Id, Nats-Expected-*,
// Nats-Rollup, Nats-TTL...): those are never sent from Message.Headers, so that no header of a
// webhook's can replace the de-duplication id or act on the stream.
func natsReserved(name string) bool {
	return len(name) >= 5 && strings.EqualFold(name[:5], "nats-")
}

// errNATSDenied marks a publish ended by a permissions violation.
var errNATSDenied = errors.New("nats: permissions violation")

// Close closes the connection; the Publisher publishes no more.
func (p *natsPublisher) Close() error {
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	p.closed = true
	if p.session != nil {
		_ = p.session.raw.Close()
		p.session.nc.Close()
		p.session = nil
	}
	return nil
}

// open returns the open session, connecting when there is none or the last one broke.
func (p *natsPublisher) open(ctx context.Context) (*natsSession, error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("nats: waiting for the connection to %s: %w", p.server, ctx.Err())
	}
	defer func() { <-p.lock }()
	if p.closed {
		return nil, errNATSClosed
	}
	if s := p.session; s != nil {
		if !s.nc.IsClosed() {
			return s, nil
		}
		p.session = nil
	}
	s, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	p.session = s
	return s, nil
}

// connect opens a connection through Target.Dial: no DNS lookup of nats.go's own (the dial
// resolves, under the address policy), no server the broker advertises (only the webhook's URL),
// no reconnect in the background.
func (p *natsPublisher) connect(ctx context.Context) (*natsSession, error) {
	s := &natsSession{denied: make(chan struct{})}
	d := &natsDialer{ctx: ctx, dial: p.target.Dial}
	timeout := natsHandshakeTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
		if timeout <= 0 {
			return nil, fmt.Errorf("nats: connect to %s: %w", p.server, context.DeadlineExceeded)
		}
	}
	opts := []nats.Option{
		nats.Name("webhookd"),
		nats.SetCustomDialer(d),
		nats.SkipHostLookup(),
		nats.NoReconnect(),
		nats.IgnoreDiscoveredServers(),
		nats.DontRandomize(),
		nats.Timeout(timeout),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				s.deny(err)
			}
		}),
	}
	if p.tls != nil {
		opts = append(opts, nats.Secure(p.tls.Clone()))
	}
	switch c := p.target.Credentials; {
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.Username != "" || c.Password != "":
		opts = append(opts, nats.UserInfo(c.Username, c.Password))
	}
	nc, err := nats.Connect(p.server, opts...)
	if err != nil {
		return nil, p.connectError(err, d.failure())
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	s.nc, s.js, s.raw = nc, js, d.conn()
	return s, nil
}

// connectError names why a connect failed. nats.go reports a refused dial as "no servers
// available", so the dial's own error, when there was one, is what is returned: egress.Classify
// reads it (refused, timeout, blocked, dns, proxy).
func (p *natsPublisher) connectError(err, dialErr error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return &Refusal{Class: ClassBrokerAuth, Err: err,
			Message: "the NATS server refused webhookd's credentials (" + strings.TrimPrefix(err.Error(), "nats: ") + ")"}
	case errors.Is(err, nats.ErrSecureConnRequired), p.tls == nil && errors.Is(err, nats.ErrTLS):
		// With a nats:// URL, nats.go moves to TLS when the server requires it, but checks the
		// certificate against the system's roots only: the tls:// URL is the one that says TLS.
		return &Refusal{Class: ClassBrokerRefused, Err: err,
			Message: "the NATS server requires TLS: use a tls:// URL"}
	case errors.Is(err, nats.ErrSecureConnWanted):
		return &Refusal{Class: ClassBrokerRefused, Err: err,
			Message: "the NATS server does not offer TLS, which a tls:// URL asks for"}
	case errors.Is(err, nats.ErrMaxConnectionsExceeded), errors.Is(err, nats.ErrMaxAccountConnectionsExceeded):
		return &Refusal{Class: ClassBrokerRefused, Busy: true, Err: err,
			Message: "the NATS server refused the connection: " + strings.TrimPrefix(err.Error(), "nats: ")}
	case p.tls != nil && errors.Is(err, nats.ErrTLS) &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)):
		// Under TLS 1.3 a server checks the client's certificate after the handshake: the client
		// reads its alert (a "remote error", which egress.Classify names TLS) or, writing first,
		// meets the closed connection. Both are the same answer.
		return fmt.Errorf("nats: connect to %s: %w", p.server, &net.OpError{Op: "remote error", Net: "tcp", Err: errNATSTLSClosed})
	case dialErr != nil:
		return fmt.Errorf("nats: connect to %s: %w", p.server, dialErr)
	}
	return fmt.Errorf("nats: connect to %s: %w", p.server, err)
}

// failed turns a failed publish into a Refusal when the server answered, or the network error when
// the connection failed; a session that can no longer be trusted is closed, so that the next
// Publish connects again.
func (p *natsPublisher) failed(s *natsSession, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, errNATSDenied):
		p.drop(s)
		return &Refusal{Class: ClassBrokerAuth, Err: err,
			Message: "the NATS server denied webhookd's user a permission it needs to publish to subject " + p.subject + ": " + s.deniedText()}
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return &Refusal{Class: ClassBrokerMissing, Err: err,
			Message: "no JetStream stream stores subject " + p.subject + " on this NATS server (or JetStream is not enabled)"}
	case errors.As(err, &apiErr):
		r := &Refusal{Class: ClassBrokerRefused, Err: err,
			Message: fmt.Sprintf("the JetStream stream refused the message: %s (code %d, err_code %d)", apiErr.Description, apiErr.Code, apiErr.ErrorCode)}
		// A full stream that discards new messages, or a server out of storage, answers 503.
		r.Busy = apiErr.Code == 503 || strings.Contains(apiErr.Description, "maximum messages") ||
			strings.Contains(apiErr.Description, "maximum bytes") || strings.Contains(apiErr.Description, "insufficient resources")
		return r
	case errors.Is(err, nats.ErrMaxPayload):
		return &Refusal{Class: ClassBrokerRefused, Err: err,
			Message: "the message is larger than the NATS server's max_payload"}
	case errors.Is(err, nats.ErrInvalidMsg), errors.Is(err, nats.ErrBadHeaderMsg):
		return &Refusal{Class: ClassBrokerRefused, Err: err, Message: "nats: " + err.Error()}
	}
	// The connection failed, or the stream did not answer in time (a broken connection the kernel
	// has not reported yet looks the same): the next Publish starts on a new connection. The
	// connection's own error (a reset, an EOF) says more than nats.go's "connection closed".
	if errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("nats: publish to %s: %w", p.server, err)
	}
	last := s.nc.LastError()
	closed := s.nc.IsClosed() || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected)
	p.drop(s)
	if closed && last != nil && !errors.Is(err, context.DeadlineExceeded) {
		err = last
	}
	return fmt.Errorf("nats: publish to %s: %w", p.server, err)
}

// drop closes s and forgets it, unless another Publish replaced it already.
func (p *natsPublisher) drop(s *natsSession) {
	_ = s.raw.Close() // first: nats.go's Close flushes, which a hung server would hold
	s.nc.Close()
	p.lock <- struct{}{}
	if p.session == s {
		p.session = nil
	}
	<-p.lock
}

func (s *natsSession) deny(err error) {
	s.deniedLock.Lock()
	if s.deniedErr == nil {
		s.deniedErr = err
	}
	s.deniedLock.Unlock()
	s.denyOnce.Do(func() { close(s.denied) })
}

// deniedText is the server's words ("Permissions Violation for Publish to \"orders\""), which name
// the subject and no credential.
func (s *natsSession) deniedText() string {
	s.deniedLock.Lock()
	defer s.deniedLock.Unlock()
	if s.deniedErr == nil {
		return "permissions violation"
	}
	return strings.TrimPrefix(s.deniedErr.Error(), "nats: permissions violation: ")
}

// natsDialer is nats.go's CustomDialer: Target.Dial with the context of the Publish that connects.
// It keeps the dial's error, which nats.go replaces by ErrNoServers when it says "connection
// refused".
type natsDialer struct {
	ctx  context.Context
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.Mutex
	err  error
	last net.Conn
}

func (d *natsDialer) Dial(network, addr string) (net.Conn, error) {
	conn, err := d.dial(d.ctx, network, addr)
	d.mu.Lock()
	d.err, d.last = err, conn
	d.mu.Unlock()
	return conn, err
}

// conn is the connection of the last dial, the one nats.go connected over.
func (d *natsDialer) conn() net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

func (d *natsDialer) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
