package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A RabbitMQ destination (docs/destinations.md): the URL is amqp://user@host:port/vhost or amqps://,
// the password is Credentials.Password, and every publish goes to Settings.Exchange ("" is the
// default exchange, which routes by queue name) with Settings.RoutingKey. The message is
// persistent, published as mandatory on a channel in confirm mode: Publish returns once the broker
// confirmed it (a queue took it, to disk for a durable queue). An unroutable message comes back
// (basic.return) and is a ClassBrokerMissing refusal; a nack is a ClassBrokerRefused one.
const (
	// rabbitMaxIdle is how many confirm channels a publisher keeps open between publishes; a
	// publish takes one for itself, so concurrent publishes open more, closed when they end.
	rabbitMaxIdle = 16
	// rabbitHeartbeat is the connection's heartbeat: a broker that stops answering is noticed
	// after about three of them, and a kept connection that died while idle is closed, so that
	// the next Publish connects again.
	rabbitHeartbeat = 10 * time.Second
	// rabbitHandshake bounds a connection's TCP, TLS and AMQP handshake when ctx has no deadline.
	rabbitHandshake = 30 * time.Second
	// rabbitCloseWait bounds Close's goodbye to the broker.
	rabbitCloseWait = 5 * time.Second
)

// errPublisherClosed is Publish's answer after Close.
var errPublisherClosed = errors.New("rabbitmq: the publisher is closed")

// OpenRabbitMQ returns the Publisher of a RabbitMQ destination. It checks the URL and connects
// nothing: the first Publish connects, and a Publish after a failed connection connects again.
func OpenRabbitMQ(_ context.Context, t Target) (Publisher, error) {
	// The URL's own parsers' errors quote it: these name the field and nothing of its value.
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
		return nil, errors.New("rabbitmq: url: not an amqp:// or amqps:// address (amqp://user@host:port/vhost)")
	}
	if _, ok := u.User.Password(); ok {
		return nil, errors.New("rabbitmq: url: carries a password; the destination's credentials hold it")
	}
	uri, err := amqp.ParseURI(t.URL)
	if err != nil {
		return nil, errors.New("rabbitmq: url: not an amqp:// or amqps:// address (amqp://user@host:port/vhost)")
	}
	// ParseURI fills in guest for a URL without a user; the password never comes from it.
	user := uri.Username
	if t.Credentials.Username != "" {
		user = t.Credentials.Username
	}
	cfg := amqp.Config{
		Vhost:      uri.Vhost,
		Heartbeat:  rabbitHeartbeat,
		Locale:     "en_US",
		Properties: amqp.Table{"product": "webhookd", "connection_name": "webhookd"},
	}
	if uri.Scheme == "amqps" {
		cfg.TLSClientConfig = brokerTLS(t, uri.Host)
	}
	return &rabbitPublisher{
		target:   t,
		host:     net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)),
		user:     user,
		cfg:      cfg,
		exchange: t.Settings.Exchange,
		key:      t.Settings.RoutingKey,
		dialing:  make(chan struct{}, 1),
	}, nil
}

type rabbitPublisher struct {
	target   Target
	host     string // host:port, for error texts
	user     string
	cfg      amqp.Config // without SASL, which connect adds
	exchange string
	key      string
	// dialing is a token: one Publish connects at a time, and the others wait for it as long as
	// their ctx lets them.
	dialing chan struct{}

	mu     sync.Mutex
	closed bool
	conn   *rabbitConn
	idle   []*rabbitChannel
}

// rabbitConn is a connection and what its socket saw.
type rabbitConn struct {
	amqp    *amqp.Connection
	sock    *recordingConn
	blocked atomic.Bool // the broker blocks publishers (a memory or disk alarm)
}

// rabbitChannel is a channel in confirm mode, used by one publish at a time: a return or a close
// that arrives before its confirm is that publish's.
type rabbitChannel struct {
	conn    *rabbitConn
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

func (p *rabbitPublisher) Publish(ctx context.Context, m Message) error {
	rc, err := p.channel(ctx)
	if err != nil {
		return err
	}
	keep, err := p.publish(ctx, rc, m)
	p.release(rc, keep)
	return err
}

// publish publishes m on rc and waits for the broker's confirm. keep says whether rc can serve
// another publish: not after its close, nor with a confirm still due.
func (p *rabbitPublisher) publish(ctx context.Context, rc *rabbitChannel, m Message) (keep bool, err error) {
	headers := make(amqp.Table, len(m.Headers))
	for name, value := range m.Headers {
		headers[name] = value
	}
	msg := amqp.Publishing{
		Headers:      headers,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    m.DedupID,
		Body:         m.Body,
	}
	// amqp091's write takes no context, and waits while the broker does not read (a message
	// larger than the sockets' buffers, a broker that blocks publishers or stopped answering):
	// ctx's end cuts it with a write deadline in the past, which ends the connection too.
	stop := context.AfterFunc(ctx, func() { _ = rc.conn.sock.SetWriteDeadline(time.Unix(1, 0)) })
	dc, err := rc.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, p.key, true, false, msg)
	cut := !stop()
	if cut {
		// The write may be cut short, its frame broken: the connection is given up.
		_ = rc.conn.sock.Close()
		return false, fmt.Errorf("rabbitmq: publish to %s: %w", p.host, ctx.Err())
	}
	if err != nil {
		if ctx.Err() != nil {
			return true, fmt.Errorf("rabbitmq: publish to %s: %w", p.host, ctx.Err())
		}
		return false, p.channelError(rc, err)
	}
	ack, err := dc.WaitContext(ctx)
	if err != nil {
		// The confirm is still due: the channel is given up, so that a late return or close
		// is not taken for another publish's.
		if rc.conn.blocked.Load() {
			return false, &Refusal{
				Class:   ClassBrokerRefused,
				Busy:    true,
				Message: "the RabbitMQ broker blocks publishers (a memory or disk alarm) and did not confirm the message in time",
				Err:     err,
			}
		}
		return false, fmt.Errorf("rabbitmq: waiting for %s to confirm the message: %w", p.host, err)
	}
	// A mandatory message that no queue took comes back before its confirm.
	// (amqp091 closes the notification channels when the channel closes.)
	select {
	case ret, ok := <-rc.returns:
		if ok {
			return ack, p.unroutable(ret)
		}
	default:
	}
	if ack {
		return true, nil
	}
	// A channel that closes resolves its confirms as nacks: its close says what happened.
	if rc.ch.IsClosed() {
		return false, p.channelError(rc, amqp.ErrClosed)
	}
	return true, &Refusal{
		Class:   ClassBrokerRefused,
		Busy:    true,
		Message: "the RabbitMQ broker refused the message (a negative confirm: a queue at its length limit that rejects publishes, or a queue without a running leader)",
	}
}

func (p *rabbitPublisher) unroutable(ret amqp.Return) error {
	var msg string
	if p.exchange == "" {
		msg = fmt.Sprintf("no queue is named %q: the default exchange routes by queue name, and the broker returned the message", p.key)
	} else {
		msg = fmt.Sprintf("no queue is bound for routing key %q on exchange %q: the broker returned the message", p.key, p.exchange)
	}
	return &Refusal{Class: ClassBrokerMissing, Message: msg, Err: fmt.Errorf("basic.return %d %s", ret.ReplyCode, ret.ReplyText)}
}

// channel returns an idle channel of the current connection, or opens one, connecting first if
// the connection is missing or closed.
func (p *rabbitPublisher) channel(ctx context.Context) (*rabbitChannel, error) {
	var stale []*rabbitChannel
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPublisherClosed
	}
	var rc *rabbitChannel
	for len(p.idle) > 0 && rc == nil {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if c.conn == p.conn && !c.ch.IsClosed() {
			rc = c
		} else {
			stale = append(stale, c)
		}
	}
	p.mu.Unlock()
	for _, c := range stale {
		go closeChannel(c)
	}
	if rc != nil {
		return rc, nil
	}
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	return p.openChannel(ctx, conn)
}

// openChannel opens a channel on conn and puts it in confirm mode. AMQP's calls take no context:
// past ctx's end the call is left to finish (its connection's heartbeat bounds it) and its
// channel closed.
func (p *rabbitPublisher) openChannel(ctx context.Context, conn *rabbitConn) (*rabbitChannel, error) {
	type opened struct {
		rc  *rabbitChannel
		err error
	}
	done := make(chan opened, 1)
	go func() {
		ch, err := conn.amqp.Channel()
		if err != nil {
			done <- opened{err: err}
			return
		}
		rc := &rabbitChannel{
			conn:    conn,
			ch:      ch,
			returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
			closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
		}
		if err := ch.Confirm(false); err != nil {
			done <- opened{rc: rc, err: err}
			return
		}
		done <- opened{rc: rc}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			if o.rc != nil {
				err := p.channelError(o.rc, o.err)
				go closeChannel(o.rc)
				return nil, err
			}
			return nil, p.connectionError(conn, o.err)
		}
		return o.rc, nil
	case <-ctx.Done():
		go func() {
			if o := <-done; o.rc != nil {
				closeChannel(o.rc)
			}
		}()
		return nil, fmt.Errorf("rabbitmq: opening a channel to %s: %w", p.host, ctx.Err())
	}
}

// connection returns the open connection, or connects.
func (p *rabbitPublisher) connection(ctx context.Context) (*rabbitConn, error) {
	select {
	case p.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("rabbitmq: waiting for the connection to %s: %w", p.host, ctx.Err())
	}
	defer func() { <-p.dialing }()
	p.mu.Lock()
	closed, conn := p.closed, p.conn
	p.mu.Unlock()
	if closed {
		return nil, errPublisherClosed
	}
	if conn != nil && !conn.amqp.IsClosed() {
		return conn, nil
	}
	conn, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = conn.amqp.CloseDeadline(time.Now().Add(rabbitCloseWait))
		return nil, errPublisherClosed
	}
	p.conn = conn
	p.mu.Unlock()
	return conn, nil
}

// connect dials through the target's Dial and opens an AMQP connection, within ctx: its deadline
// is the socket's during the handshake, and its end interrupts the handshake.
func (p *rabbitPublisher) connect(ctx context.Context) (*rabbitConn, error) {
	conn := &rabbitConn{}
	var stop func() bool
	cfg := p.cfg
	cfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: p.user, Password: p.target.Credentials.Password}}
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		c, err := p.target.Dial(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq: connect to %s: %w", p.host, err)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(rabbitHandshake)
		}
		// The AMQP handshake clears the deadline when it completes.
		if err := c.SetDeadline(deadline); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("rabbitmq: connect to %s: %w", p.host, err)
		}
		conn.sock = &recordingConn{Conn: c}
		stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
		return conn.sock, nil
	}
	c, err := amqp.DialConfig(p.target.URL, cfg)
	if stop != nil && !stop() {
		// ctx ended during the handshake, and its socket's deadline is past.
		if err == nil {
			_ = c.Close()
		}
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", p.host, ctx.Err())
	}
	if err != nil {
		var amqpErr *amqp.Error
		if !errors.As(err, &amqpErr) || conn.sock == nil {
			// Dial's own error, already wrapped; or TLS's.
			if conn.sock != nil {
				return nil, fmt.Errorf("rabbitmq: connect to %s: %w", p.host, err)
			}
			return nil, err
		}
		return nil, p.handshakeError(conn, amqpErr)
	}
	conn.amqp = c
	blocks := c.NotifyBlocked(make(chan amqp.Blocking, 1))
	go func() {
		// Ends when the connection closes: amqp091 closes its notification channels then.
		for b := range blocks {
			conn.blocked.Store(b.Active)
		}
	}()
	return conn, nil
}

// handshakeError names why the broker did not open the connection.
func (p *rabbitPublisher) handshakeError(conn *rabbitConn, err *amqp.Error) error {
	if err.Server {
		return p.closeRefusal(err)
	}
	// amqp091 answers ErrCredentials (ErrVhost) when the socket ended right after the login
	// (the request of the virtual host) with no reason given: what the AMQP 0-9-1 spec has a
	// broker do on a refusal, and RabbitMQ does (a few seconds later, then a reset) for a client
	// that does not announce authentication_failure_close, which amqp091 cannot announce. A
	// socket that timed out is no answer.
	sockErr := conn.sock.ioErr()
	hungUp := sockErr == nil || errors.Is(sockErr, io.EOF) || errors.Is(sockErr, syscall.ECONNRESET)
	if err == amqp.ErrCredentials && hungUp {
		return &Refusal{
			Class:   ClassBrokerAuth,
			Message: fmt.Sprintf("the RabbitMQ broker at %s refused the login of user %q", p.host, p.user),
			Err:     err,
		}
	}
	if err == amqp.ErrVhost && hungUp {
		return &Refusal{
			Class:   ClassBrokerAuth,
			Message: fmt.Sprintf("the RabbitMQ broker at %s refused access to virtual host %q", p.host, p.cfg.Vhost),
			Err:     err,
		}
	}
	return p.lost(conn, err)
}

// channelError names why a channel's call failed: the broker's close of the channel or of the
// connection, or the connection's loss.
func (p *rabbitPublisher) channelError(rc *rabbitChannel, err error) error {
	select {
	case closeErr, ok := <-rc.closes:
		if ok && closeErr != nil {
			err = closeErr
		}
	default:
	}
	return p.connectionError(rc.conn, err)
}

func (p *rabbitPublisher) connectionError(conn *rabbitConn, err error) error {
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) && amqpErr.Server {
		return p.closeRefusal(amqpErr)
	}
	return p.lost(conn, err)
}

// lost is a connection that failed: the socket's own error where it had one (a reset, a timeout,
// the end of the stream), for egress.Classify.
func (p *rabbitPublisher) lost(conn *rabbitConn, err error) error {
	if sockErr := conn.sock.ioErr(); sockErr != nil {
		return fmt.Errorf("rabbitmq: connection to %s lost: %w", p.host, sockErr)
	}
	return fmt.Errorf("rabbitmq: connection to %s failed: %w", p.host, err)
}

// closeRefusal is the broker's close of a channel or a connection, with its reply code. The reply
// text is the broker's (such as "NOT_FOUND - no exchange 'x' in vhost 'y'"): it names no
// credential.
func (p *rabbitPublisher) closeRefusal(err *amqp.Error) error {
	switch err.Code {
	case amqp.AccessRefused:
		return &Refusal{Class: ClassBrokerAuth, Message: "the RabbitMQ broker refused access: " + err.Reason, Err: err}
	case amqp.NotFound:
		return &Refusal{Class: ClassBrokerMissing, Message: "the RabbitMQ broker has no such exchange or queue: " + err.Reason, Err: err}
	case amqp.NotAllowed:
		// Connection.open's refusal of the virtual host: missing, or not the user's.
		if strings.Contains(err.Reason, "not found") {
			return &Refusal{Class: ClassBrokerMissing, Message: "the RabbitMQ broker has no such virtual host: " + err.Reason, Err: err}
		}
		return &Refusal{Class: ClassBrokerAuth, Message: "the RabbitMQ broker refused access: " + err.Reason, Err: err}
	case amqp.ResourceError:
		return &Refusal{Class: ClassBrokerRefused, Busy: true, Message: "the RabbitMQ broker is short of a resource: " + err.Reason, Err: err}
	case amqp.ConnectionForced:
		// The broker shutting down or an operator closing the connection: not a refusal of
		// the message; the next attempt connects again.
		return fmt.Errorf("rabbitmq: connection to %s closed by the broker: %w", p.host, err)
	}
	return &Refusal{Class: ClassBrokerRefused, Message: fmt.Sprintf("the RabbitMQ broker refused the publish (%d): %s", err.Code, err.Reason), Err: err}
}

// release keeps rc for the next publish, or closes it.
func (p *rabbitPublisher) release(rc *rabbitChannel, keep bool) {
	p.mu.Lock()
	if keep && !p.closed && rc.conn == p.conn && len(p.idle) < rabbitMaxIdle && !rc.ch.IsClosed() {
		p.idle = append(p.idle, rc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go closeChannel(rc)
}

// closeChannel closes a channel no publish uses. It waits for the broker's answer, which the
// connection's heartbeat bounds; callers run it on its own.
func closeChannel(rc *rabbitChannel) {
	if !rc.ch.IsClosed() {
		_ = rc.ch.Close()
	}
}

// Close closes the connection and its channels. It is idempotent.
func (p *rabbitPublisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conn := p.conn
	p.conn, p.idle = nil, nil
	p.mu.Unlock()
	if conn == nil || conn.amqp.IsClosed() {
		return nil
	}
	if err := conn.amqp.CloseDeadline(time.Now().Add(rabbitCloseWait)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("rabbitmq: close the connection to %s: %w", p.host, err)
	}
	return nil
}

// recordingConn keeps the first error its socket read or wrote: amqp091 reports a lost
// connection as text, and egress.Classify reads the error itself (a reset, a timeout, EOF).
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	err error
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.record(err)
	}
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.record(err)
	}
	return n, err
}

func (c *recordingConn) record(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

func (c *recordingConn) ioErr() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
