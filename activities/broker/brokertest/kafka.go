package brokertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// KafkaTopic is the topic StartKafka creates, with KafkaPartitions partitions.
const (
	KafkaTopic      = "webhooks"
	KafkaPartitions = 3
)

// Kafka is a Kafka cluster for tests. It is NOT a real Kafka broker: no Kafka broker runs on
// these machines (it needs a JVM), so this is franz-go's in-process fake cluster, kfake, which
// speaks the Kafka protocol on a local port (produce with acks, idempotent producer ids and
// sequence numbers, SASL, ACLs, topics that do not exist). It runs in the test's process, not as a
// process of its own: Kill closes it (listeners and connections) and Restart starts a new one on
// the same port over the same data directory, so records published before the kill are still
// there, as after a real broker's restart.
type Kafka struct {
	tls   *tls.Config // the helper's client's, when the cluster speaks TLS
	opts  []kfake.Opt
	users map[string]string // the SASL/PLAIN users and their passwords
	port  int
	sasl  *plain.Auth
	mu    sync.Mutex
	live  *kfake.Cluster
	admin *kgo.Client // reads records and offsets as the cluster's superuser
}

// KafkaOption sets up StartKafka's cluster.
type KafkaOption func(*kafkaSetup)

type kafkaSetup struct {
	opts  []kfake.Opt
	sasl  *plain.Auth
	users map[string]string
	acls  bool
	tls   *tls.Config
}

// KafkaTLS makes the cluster speak TLS only, with cert; roots are what the helper's own client
// verifies it with. URL is then kafka+tls://.
func KafkaTLS(cert tls.Certificate, roots *x509.CertPool) KafkaOption {
	return func(s *kafkaSetup) {
		s.opts = append(s.opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
		s.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
}

// KafkaSASL makes the cluster take only SASL/PLAIN connections, with user and password as its
// superuser (the one the helper reads with).
func KafkaSASL(user, password string) KafkaOption {
	return func(s *kafkaSetup) {
		s.opts = append(s.opts, kfake.EnableSASL(), kfake.Superuser("PLAIN", user, password))
		s.sasl = &plain.Auth{User: user, Pass: password}
		s.users[user] = password
	}
}

// KafkaReadOnlyUser adds a SASL/PLAIN user who may describe and read KafkaTopic but not write it,
// and turns ACL checks on (with KafkaSASL, whose superuser passes every check).
func KafkaReadOnlyUser(user, password string) KafkaOption {
	return func(s *kafkaSetup) {
		allow := func(op kmsg.ACLOperation) kfake.ACL {
			return kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: KafkaTopic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
		}
		s.opts = append(s.opts, kfake.User("PLAIN", user, password, allow(kmsg.ACLOperationDescribe), allow(kmsg.ACLOperationRead)))
		s.users[user] = password
		s.acls = true
	}
}

// KafkaMaxMessageBytes sets the broker's message.max.bytes: a record batch larger than n is
// refused with MESSAGE_TOO_LARGE.
func KafkaMaxMessageBytes(n int) KafkaOption {
	return func(s *kafkaSetup) {
		s.opts = append(s.opts, kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(n)}))
	}
}

// StartKafka starts a one-broker kfake cluster on a free port of 127.0.0.1 with KafkaTopic, its
// data in a temporary directory (written at every produce, as a broker with fsync on). t.Cleanup
// stops it.
func StartKafka(t testing.TB, options ...KafkaOption) *Kafka {
	t.Helper()
	s := kafkaSetup{users: map[string]string{}}
	for _, o := range options {
		o(&s)
	}
	opts := append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DataDir(t.TempDir()),
		kfake.SyncWrites(),
		kfake.SeedTopics(KafkaPartitions, KafkaTopic),
	}, s.opts...)
	if s.acls {
		opts = append(opts, kfake.EnableACLs())
	}
	k := &Kafka{opts: opts, sasl: s.sasl, users: s.users, tls: s.tls}
	k.start(t)
	_, port, err := net.SplitHostPort(k.live.ListenAddrs()[0])
	if err == nil {
		k.port, err = strconv.Atoi(port)
	}
	if err != nil {
		t.Fatalf("kfake listens on %v: %v", k.live.ListenAddrs(), err)
	}
	t.Cleanup(func() {
		k.mu.Lock()
		if k.admin != nil {
			k.admin.Close()
		}
		k.mu.Unlock()
		k.Kill()
	})
	return k
}

func (k *Kafka) start(t testing.TB) {
	t.Helper()
	opts := k.opts
	if k.port != 0 {
		opts = append(opts[:len(opts):len(opts)], kfake.Ports(k.port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("starting kfake (franz-go's in-process Kafka cluster): %v", err)
	}
	if len(k.users) > 0 {
		c.ControlKey(int16(kmsg.SASLAuthenticate), k.refuseBadLogin(c))
	}
	k.mu.Lock()
	k.live = c
	k.mu.Unlock()
}

// refuseBadLogin makes kfake answer a SASL/PLAIN login it does not know as Kafka does, with
// SASL_AUTHENTICATION_FAILED and Kafka's message, where kfake itself would only close the
// connection. A good login goes on to kfake.
func (k *Kafka) refuseBadLogin(c *kfake.Cluster) func(kmsg.Request) (kmsg.Response, error, bool) {
	return func(req kmsg.Request) (kmsg.Response, error, bool) {
		auth, ok := req.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			return nil, nil, false
		}
		// PLAIN's message: authorization id, user, password, separated by NUL.
		parts := strings.SplitN(string(auth.SASLAuthBytes), "\x00", 3)
		if len(parts) == 3 {
			if password, known := k.users[parts[1]]; known && password == parts[2] {
				return nil, nil, false
			}
		}
		c.KeepControl()
		resp := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: Invalid username or password"
		resp.ErrorMessage = &msg
		return resp, nil, true
	}
}

// URL is the destination's URL as a webhook stores it: kafka://127.0.0.1:<port>, or
// kafka+tls:// with KafkaTLS.
func (k *Kafka) URL() string {
	if k.tls != nil {
		return "kafka+tls://" + k.Addr()
	}
	return "kafka://" + k.Addr()
}

// Addr is the broker's host:port.
func (k *Kafka) Addr() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

// Kill stops the cluster at once: its listener and every connection close, as when a broker's
// process dies (the nearest an in-process cluster comes to kill -9; its data stays on disk).
func (k *Kafka) Kill() {
	k.mu.Lock()
	c := k.live
	k.live = nil
	k.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// StopAnswering makes the cluster read produce requests and answer none, as a broker that hangs
// with its connections open, until Restart.
func (k *Kafka) StopAnswering(t testing.TB) {
	t.Helper()
	k.mu.Lock()
	c := k.live
	k.mu.Unlock()
	if c == nil {
		t.Fatal("kafka: StopAnswering with the cluster killed")
	}
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true // handled, with no answer
	})
}

// Restart starts the cluster again on the same port over the same data, after Kill.
func (k *Kafka) Restart(t testing.TB) {
	t.Helper()
	k.Kill()
	k.start(t)
}

// Consume returns the next n records of KafkaTopic that this helper has not returned yet, in
// each partition's order, failing t when fewer than n arrive within timeout.
func (k *Kafka) Consume(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	got := k.Poll(t, n, timeout)
	if len(got) < n {
		t.Fatalf("kafka: %d of %d records consumed from %s in %s", len(got), n, KafkaTopic, timeout)
	}
	return got
}

// Poll returns up to n records of KafkaTopic that this helper has not returned yet: once n came,
// or once timeout passed, with what came.
func (k *Kafka) Poll(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	cl := k.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []Received
	for len(got) < n {
		fetches := cl.PollRecords(ctx, n-len(got))
		fetches.EachRecord(func(r *kgo.Record) {
			h := make(map[string]string, len(r.Headers))
			for _, rh := range r.Headers {
				h[rh.Key] = string(rh.Value)
			}
			got = append(got, Received{Body: r.Value, Headers: h, Key: string(r.Key)})
		})
		if ctx.Err() != nil {
			break
		}
	}
	return got
}

// Count is how many records KafkaTopic holds: the sum of its partitions' end offsets. Records
// are in the log once their produce was acknowledged, so this needs no wait.
func (k *Kafka) Count(t testing.TB) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = KafkaTopic
	for p := range int32(KafkaPartitions) {
		part := kmsg.NewListOffsetsRequestTopicPartition()
		part.Partition, part.Timestamp = p, -1 // -1: the end of the log
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, k.client(t))
	if err != nil {
		t.Fatalf("kafka: listing the end offsets of %s: %v", KafkaTopic, err)
	}
	var total int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("kafka: end offset of %s/%d: error code %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
			total += rp.Offset
		}
	}
	return total
}

// client is the helper's own client, made once: it consumes KafkaTopic from its start, as the
// superuser when the cluster takes SASL, and reconnects by itself after a restart.
func (k *Kafka) client(t testing.TB) *kgo.Client {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.admin != nil {
		return k.admin
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.Addr()),
		kgo.ConsumeTopics(KafkaTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if k.sasl != nil {
		opts = append(opts, kgo.SASL(k.sasl.AsMechanism()))
	}
	if k.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(k.tls))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(fmt.Errorf("kafka: the helper's client: %w", err))
	}
	k.admin = cl
	return cl
}
