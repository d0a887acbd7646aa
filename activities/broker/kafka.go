package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/webhookd/webhookd/wire"
)

// The schemes of a Kafka destination's URL: kafka://host:port[,host:port] in plaintext,
// kafka+tls:// over TLS. A seed without a port is on Kafka's 9092.
const (
	kafkaScheme    = "kafka"
	kafkaTLSScheme = "kafka+tls"
	kafkaPort      = "9092"
)

// kafkaRecordRetries bounds how often one record is sent again after the broker answered with an
// error it calls retriable (NOT_ENOUGH_REPLICAS, a leader moving): past it, the record fails with
// that answer, a refusal the attempt log names, instead of with the attempt's deadline. The
// client's backoff (250 ms doubling to 5 s) makes it about 30 s. A record the broker may have
// written is never failed early: franz-go keeps retrying it, as the idempotent producer must.
const kafkaRecordRetries = 10

// kafkaPublisher produces into one topic with one franz-go client: its connections to the
// brokers stay open between attempts, and it dials again by itself when one broke.
type kafkaPublisher struct {
	client *kgo.Client
	topic  string
	conns  lastConnect
	close  sync.Once
}

// OpenKafka makes a Publisher for a Kafka destination (t.URL kafka:// or kafka+tls://,
// t.Settings.Topic). It connects on the first Publish, so a broker down now is no error here.
// Records are produced by the idempotent producer with acks from all in-sync replicas; the
// record's key is the ordered lane's key, so one lane stays in one partition and in order.
// Credentials.Username and Password, when set, are SASL/PLAIN's.
func OpenKafka(_ context.Context, t Target) (Publisher, error) {
	seeds, useTLS, err := kafkaSeeds(t.URL)
	if err != nil {
		return nil, err
	}
	if t.Settings.Topic == "" {
		return nil, errors.New("kafka: the destination has no topic")
	}
	if t.Dial == nil {
		return nil, errors.New("kafka: the target has no dialer")
	}
	p := &kafkaPublisher{topic: t.Settings.Topic}
	dial := t.Dial
	if useTLS {
		dial = dialTLS(t)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		// Every connection goes through the address policy and the egress proxy.
		kgo.Dialer(p.conns.wrap(dial)),
		// franz-go tells a broker's refusal of the SASL credentials only to its logger, and
		// retries it until the record's context ends: this logger writes nothing and keeps it.
		kgo.WithLogger(&p.conns),
		kgo.ClientID("webhookd"),
		// The customer's brokers get webhookd's records, not its client's metrics (KIP-714).
		kgo.DisableClientMetrics(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(t.Settings.Topic),
		// An attempt waits for its own record's ack: lingering would only add to every attempt.
		kgo.ProducerLinger(0),
		kgo.RecordRetries(kafkaRecordRetries),
		// kgo.AllowAutoTopicCreation is left off: a topic that does not exist is the customer's
		// to create, and the attempt fails with broker_missing until it does.
	}
	if c := t.Credentials; c.Username != "" || c.Password != "" {
		if c.Username == "" || c.Password == "" {
			return nil, errors.New("kafka: SASL/PLAIN needs both a username and a password")
		}
		opts = append(opts, kgo.SASL(plain.Auth{User: c.Username, Pass: c.Password}.AsMechanism()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		// franz-go checks only the options here, which hold no secret in their errors.
		return nil, fmt.Errorf("kafka: %w", err)
	}
	p.client = client
	return p, nil
}

// kafkaSeeds reads a destination's URL into its seed brokers' host:port and whether they speak
// TLS. url.Parse does not take a list of hosts, so the authority is split here.
func kafkaSeeds(raw string) (seeds []string, useTLS bool, err error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok:
		return nil, false, errors.New("kafka: the URL must be kafka://host:port or kafka+tls://host:port")
	case strings.EqualFold(scheme, kafkaScheme):
	case strings.EqualFold(scheme, kafkaTLSScheme):
		useTLS = true
	default:
		return nil, false, fmt.Errorf("kafka: the URL's scheme must be %s or %s, not %q", kafkaScheme, kafkaTLSScheme, scheme)
	}
	authority, _, _ := strings.Cut(rest, "/")
	// The URL as stored names its SASL user (user@host:port); the user and the password come from
	// the destination's credentials.
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if strings.Contains(authority[:at], ":") {
			return nil, false, errors.New("kafka: the URL must not hold a password (credentials go in the destination's credentials)")
		}
		authority = authority[at+1:]
	}
	if strings.ContainsAny(authority, "?#") {
		return nil, false, errors.New("kafka: the URL holds only brokers' host:port")
	}
	for seed := range strings.SplitSeq(authority, ",") {
		host, port, err := net.SplitHostPort(seed)
		if err != nil && !strings.Contains(seed, ":") {
			host, port, err = seed, kafkaPort, nil
		}
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 || host == "" {
			return nil, false, fmt.Errorf("kafka: the broker address %q is not host:port", seed)
		}
		seeds = append(seeds, net.JoinHostPort(host, port))
	}
	return seeds, useTLS, nil
}

// dialTLS speaks TLS over dial's connections, verifying the broker's certificate for its name.
// franz-go's own TLS option cannot be combined with a dialer of ours.
func dialTLS(t Target) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := t.Dial
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, brokerTLS(t, host))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// Publish produces m as one record and returns once all in-sync replicas have it, or when ctx
// ends, whichever comes first. A record still in flight when ctx ends may yet be written: it
// carries its webhook-id, by which a consumer drops the duplicate of a later attempt.
func (p *kafkaPublisher) Publish(ctx context.Context, m Message) error {
	r := &kgo.Record{Topic: p.topic, Value: m.Body, Headers: kafkaHeaders(m)}
	if m.OrderingKey != "" {
		r.Key = []byte(m.OrderingKey)
	}
	refused := p.conns.watch()
	done := make(chan error, 1)
	p.client.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return p.failure(err)
	case <-refused.done:
		// The credentials are wrong and will be on every retry: the attempt fails now, as an
		// HTTPS one does on a 401. The record, never sent, fails when ctx ends.
		return p.failure(refused.err)
	case <-ctx.Done():
		return p.failure(ctx.Err())
	}
}

// kafkaHeaders are m's headers as record headers, sorted by name so that every attempt sends
// them alike, with the webhook-id (Kafka has no de-duplication id of its own) when m's headers
// lack it.
func kafkaHeaders(m Message) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(m.Headers)+1)
	for name, value := range m.Headers {
		hs = append(hs, kgo.RecordHeader{Key: name, Value: []byte(value)})
	}
	if _, ok := m.Headers[wire.HeaderID]; !ok && m.DedupID != "" {
		hs = append(hs, kgo.RecordHeader{Key: wire.HeaderID, Value: []byte(m.DedupID)})
	}
	slices.SortFunc(hs, func(a, b kgo.RecordHeader) int { return strings.Compare(a.Key, b.Key) })
	return hs
}

// failure turns a produce's error into the contract's: a broker's answer is a *Refusal; a record
// that failed without one while the brokers could not be dialed fails with the dial's error, so
// that egress.Classify names the cause (refused, blocked, dns, tls) rather than the deadline.
func (p *kafkaPublisher) failure(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return kafkaRefusal(ke, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) {
		if dialErr := p.conns.err(); dialErr != nil {
			return fmt.Errorf("kafka: no broker could be reached: %w", dialErr)
		}
	}
	return fmt.Errorf("kafka: %w", err)
}

// kafkaRefusal classes a broker's error answer. Its text is Kafka's name and description of the
// code, which name no credential.
func kafkaRefusal(ke *kerr.Error, err error) *Refusal {
	r := &Refusal{Class: ClassBrokerRefused, Message: "kafka refused the record: " + ke.Error(), Err: err}
	switch ke.Code {
	case kerr.SaslAuthenticationFailed.Code, kerr.UnsupportedSaslMechanism.Code, kerr.IllegalSaslState.Code:
		r.Class, r.Message = ClassBrokerAuth, "kafka refused the credentials: "+ke.Error()
	case kerr.TopicAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code:
		r.Class, r.Message = ClassBrokerAuth, "kafka refused the permission to produce: "+ke.Error()
	case kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
		r.Class, r.Message = ClassBrokerMissing, "kafka has no such topic: "+ke.Error()
	case kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code,
		kerr.ThrottlingQuotaExceeded.Code, kerr.KafkaStorageError.Code:
		r.Busy = true
	}
	return r
}

// kafkaAuthCode reports whether code is a broker's refusal of the SASL credentials.
func kafkaAuthCode(code int16) bool {
	return code == kerr.SaslAuthenticationFailed.Code || code == kerr.UnsupportedSaslMechanism.Code || code == kerr.IllegalSaslState.Code
}

// Close closes the client's connections; records still buffered fail with kgo.ErrClientClosed.
func (p *kafkaPublisher) Close() error {
	p.close.Do(p.client.Close)
	return nil
}

// lastConnect remembers why the latest dial of a broker failed, nil when it connected: franz-go
// retries a dial until the record's context ends, and then reports the context, not the cause.
// It is also franz-go's logger, to hear of a broker's refusal of the credentials.
type lastConnect struct {
	mu      sync.Mutex
	fail    error
	refusal *credentialsRefusal
}

// credentialsRefusal is closed at a broker's refusal of the credentials, with its answer in err.
type credentialsRefusal struct {
	done chan struct{}
	err  error
}

func (c *lastConnect) wrap(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		c.mu.Lock()
		c.fail = err
		c.mu.Unlock()
		return conn, err
	}
}

// err is why the latest dial failed, nil when it connected.
func (c *lastConnect) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fail
}

// watch returns what closes at the next refusal of the credentials, not at one before: the
// customer may have fixed the broker's users since.
func (c *lastConnect) watch() *credentialsRefusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusal == nil {
		c.refusal = &credentialsRefusal{done: make(chan struct{})}
	}
	return c.refusal
}

// Level is kgo.Logger's: franz-go logs a broker's refusal of the credentials at the error level.
func (c *lastConnect) Level() kgo.LogLevel { return kgo.LogLevelError }

// Log is kgo.Logger's. It writes nothing (webhookd logs the attempt's outcome) and tells the
// publishes waiting of a broker's refusal of the credentials.
func (c *lastConnect) Log(_ kgo.LogLevel, _ string, keyvals ...any) {
	for i := 0; i+1 < len(keyvals); i += 2 {
		err, ok := keyvals[i+1].(error)
		var ke *kerr.Error
		if !ok || keyvals[i] != "err" || !errors.As(err, &ke) || !kafkaAuthCode(ke.Code) {
			continue
		}
		c.mu.Lock()
		if r := c.refusal; r != nil {
			r.err = err
			close(r.done)
			c.refusal = nil
		}
		c.mu.Unlock()
	}
}
