//go:build integration

package broker_test

// These tests publish into franz-go's in-process Kafka cluster (kfake, brokertest.StartKafka), NOT
// into a real Kafka broker: none runs on these machines. kfake speaks the Kafka protocol on a
// local port, with acks, idempotent producer ids, SASL/PLAIN, ACLs and topics that do not exist.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/wire"
)

// kafkaEventually is the generous bound on what must happen, never a measure of how fast.
const kafkaEventually = 60 * time.Second

// kafkaTarget is a Kafka destination on k's topic, dialed by a plain dialer that counts its dials.
func kafkaTarget(k *brokertest.Kafka, creds destination.Credentials) (broker.Target, *atomic.Int64) {
	var dials atomic.Int64
	var d net.Dialer
	return broker.Target{
		URL:         k.URL(),
		Settings:    destination.Settings{Type: destination.Kafka, Topic: brokertest.KafkaTopic},
		Credentials: creds,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}, &dials
}

func openKafka(t *testing.T, target broker.Target) broker.Publisher {
	t.Helper()
	p, err := broker.OpenKafka(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// kafkaSecret is a fresh Standard Webhooks signing secret.
func kafkaSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return wire.SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// kafkaMessage is delivery i of a webhook as the broker receiver builds it: the delivery headers
// of an HTTPS attempt, lower-case, with the Standard Webhooks signature.
func kafkaMessage(t *testing.T, secret string, i int, orderingKey string) broker.Message {
	t.Helper()
	msgID := wire.MessageID(int64(1000+i), 7)
	body := fmt.Appendf(nil, `{"type":"invoice.paid","timestamp":"2026-12-06T20:00:00Z","data":{"n":%d,"text":"caf\u00e9 \u2603"}}`, i)
	signedAt := time.Now()
	signature, err := wire.StandardSignature(msgID, signedAt, body, secret)
	if err != nil {
		t.Fatal(err)
	}
	header := wire.DeliveryHeader(msgID, "invoice.paid", "webhookd-test", signedAt)
	header.Set(wire.HeaderSignature, signature)
	header.Set(wire.HeaderSequence, strconv.Itoa(i+1))
	headers := make(map[string]string, len(header))
	for name := range header {
		headers[strings.ToLower(name)] = header.Get(name)
	}
	return broker.Message{Body: body, Headers: headers, DedupID: msgID, OrderingKey: orderingKey}
}

// TestKafkaPublish: 20 deliveries, half of them on one ordered lane, arrive byte for byte with
// every header, the lane's key as the record key and in the lane's order, and their signatures
// verify with the Standard Webhooks library; every connection was dialed through Target.Dial.
func TestKafkaPublish(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, dials := kafkaTarget(k, destination.Credentials{})
	p := openKafka(t, target)
	secret := kafkaSecret(t)

	sent := map[string]broker.Message{}
	for i := range 20 {
		key := ""
		if i%2 == 0 {
			key = "customer-42"
		}
		m := kafkaMessage(t, secret, i, key)
		if err := publish(t, p, m, kafkaEventually); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		sent[m.DedupID] = m
	}
	if dials.Load() == 0 {
		t.Fatal("the publisher connected without Target.Dial")
	}

	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	lastSeq := 0
	for _, r := range k.Consume(t, 20, kafkaEventually) {
		id := r.Headers[wire.HeaderID]
		m, ok := sent[id]
		if !ok {
			t.Fatalf("consumed a record with webhook-id %q, never published (or twice)", id)
		}
		delete(sent, id)
		if string(r.Body) != string(m.Body) {
			t.Errorf("%s: body %q, published %q", id, r.Body, m.Body)
		}
		for name, value := range m.Headers {
			if r.Headers[name] != value {
				t.Errorf("%s: header %s = %q, published %q", id, name, r.Headers[name], value)
			}
		}
		if r.Key != m.OrderingKey {
			t.Errorf("%s: record key %q, want the ordering key %q", id, r.Key, m.OrderingKey)
		}
		if m.OrderingKey != "" {
			seq, _ := strconv.Atoi(r.Headers[wire.HeaderSequence])
			if seq < lastSeq {
				t.Errorf("%s: lane out of order: sequence %d after %d", id, seq, lastSeq)
			}
			lastSeq = seq
		}
		h := http.Header{}
		for name, value := range r.Headers {
			h.Set(name, value)
		}
		if err := wh.Verify(r.Body, h); err != nil {
			t.Errorf("%s: the Standard Webhooks library refused the signature: %v", id, err)
		}
	}
	if len(sent) != 0 {
		t.Errorf("%d deliveries were not consumed", len(sent))
	}
}

// TestKafkaBrokerDown: with the cluster killed, Publish fails within its deadline with the
// connection's error, which egress.Classify names "refused" and which is no *Refusal; after the
// restart (same port, same data) the same Publisher publishes again.
func TestKafkaBrokerDown(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	p := openKafka(t, target)
	secret := kafkaSecret(t)
	if err := publish(t, p, kafkaMessage(t, secret, 0, ""), kafkaEventually); err != nil {
		t.Fatal(err)
	}

	k.Kill()
	// The deadline is generous next to the test's own bound on Publish returning.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Publish(ctx, kafkaMessage(t, secret, 1, "")) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(kafkaEventually):
		t.Fatal("Publish did not return after its deadline")
	}
	if err == nil {
		t.Fatal("Publish succeeded with the cluster down")
	}
	if r := broker.AsRefusal(err); r != nil {
		t.Fatalf("Publish with the cluster down returned a refusal (%s: %s); want the network error", r.Class, r.Message)
	}
	if class, message := egress.Classify(err); class != egress.ClassRefused {
		t.Errorf("Classify(%v) = %s (%s), want %s", err, class, message, egress.ClassRefused)
	}

	k.Restart(t)
	if err := publish(t, p, kafkaMessage(t, secret, 2, ""), kafkaEventually); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	// The record published while the cluster was down may land too, after the restart: franz-go
	// keeps a record it may have sent, and the webhook-id tells its duplicate.
	n := k.Count(t)
	if n != 2 && n != 3 {
		t.Fatalf("the topic holds %d records, want the 2 published while the cluster was up, and maybe the one tried while it was down", n)
	}
	got := k.Consume(t, int(n), kafkaEventually)
	ids := map[string]bool{}
	for _, r := range got {
		ids[r.Headers[wire.HeaderID]] = true
	}
	for _, i := range []int{0, 2} {
		if id := wire.MessageID(int64(1000+i), 7); !ids[id] {
			t.Errorf("delivery %s (published while the cluster was up) is not in the topic after the restart: got %v", id, ids)
		}
	}
}

// TestKafkaBrokerHangs: a broker that takes the record and never answers fails the attempt at
// its deadline, as "timeout" and no *Refusal; after the restart the same Publisher publishes.
func TestKafkaBrokerHangs(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	p := openKafka(t, target)
	secret := kafkaSecret(t)
	if err := publish(t, p, kafkaMessage(t, secret, 0, ""), kafkaEventually); err != nil {
		t.Fatal(err)
	}
	k.StopAnswering(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Publish(ctx, kafkaMessage(t, secret, 1, "")) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(kafkaEventually):
		t.Fatal("Publish did not return after its deadline")
	}
	if r := broker.AsRefusal(err); r != nil || err == nil {
		t.Fatalf("Publish to a hung broker = %v, want the deadline's error", err)
	}
	if class, message := egress.Classify(err); class != egress.ClassTimeout {
		t.Errorf("Classify(%v) = %s (%s), want %s", err, class, message, egress.ClassTimeout)
	}
	k.Restart(t)
	if err := publish(t, p, kafkaMessage(t, secret, 2, ""), kafkaEventually); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}

// TestKafkaBlockedAddress: a dial the address policy refuses fails the attempt as "blocked",
// though franz-go retried it until the deadline.
func TestKafkaBlockedAddress(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	target.Dial = func(_ context.Context, network, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("%w: %s is loopback", egress.ErrBlockedAddress, addr)
	}
	p := openKafka(t, target)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := p.Publish(ctx, kafkaMessage(t, kafkaSecret(t), 0, ""))
	if class, message := egress.Classify(err); class != egress.ClassBlocked {
		t.Errorf("Classify(%v) = %s (%s), want %s", err, class, message, egress.ClassBlocked)
	}
	if n := k.Count(t); n != 0 {
		t.Errorf("the topic holds %d records; the blocked publisher must have sent none", n)
	}
}

// TestKafkaTLS: kafka+tls:// speaks TLS through Target.Dial and verifies the broker's certificate
// (for its name, with the system's roots): one signed by a private CA fails the attempt as "tls",
// and the cluster, reached, holds nothing.
func TestKafkaTLS(t *testing.T) {
	ca := egresstest.NewCA(t, "kafka test CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	k := brokertest.StartKafka(t, brokertest.KafkaTLS(ca.Server(t).TLS, ca.Pool()))
	target, dials := kafkaTarget(k, destination.Credentials{})
	if !strings.HasPrefix(target.URL, "kafka+tls://") {
		t.Fatalf("URL %s, want kafka+tls://", target.URL)
	}
	p := openKafka(t, target)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := p.Publish(ctx, kafkaMessage(t, kafkaSecret(t), 0, ""))
	if class, message := egress.Classify(err); class != egress.ClassTLS {
		t.Errorf("Classify(%v) = %s (%s), want %s", err, class, message, egress.ClassTLS)
	}
	if dials.Load() == 0 {
		t.Error("the publisher connected without Target.Dial")
	}
	if n := k.Count(t); n != 0 {
		t.Errorf("the topic holds %d records; the publisher must not have trusted the broker", n)
	}
}

// TestKafkaConcurrent: one Publisher takes publishes from many goroutines at once, every one
// acknowledged and consumed once.
func TestKafkaConcurrent(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	p := openKafka(t, target)
	secret := kafkaSecret(t)
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		m := kafkaMessage(t, secret, i, "lane-"+strconv.Itoa(i%4))
		go func() { errs <- publish(t, p, m, kafkaEventually) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for _, r := range k.Consume(t, n, kafkaEventually) {
		id := r.Headers[wire.HeaderID]
		if seen[id] {
			t.Errorf("%s consumed twice", id)
		}
		seen[id] = true
	}
	if c := k.Count(t); c != n {
		t.Errorf("the topic holds %d records, want %d", c, n)
	}
}

// TestKafkaDuplicates: Kafka has no de-duplication id (its idempotent producer only drops the
// retries of one producer session), so the same delivery published twice is two records; both
// carry the one webhook-id, by which the consumer drops the second.
func TestKafkaDuplicates(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	p := openKafka(t, target)
	m := kafkaMessage(t, kafkaSecret(t), 0, "")
	delete(m.Headers, wire.HeaderID) // the record header comes from DedupID too
	for range 2 {
		if err := publish(t, p, m, kafkaEventually); err != nil {
			t.Fatal(err)
		}
	}
	if n := k.Count(t); n != 2 {
		t.Fatalf("the topic holds %d records, want the 2 published", n)
	}
	for _, r := range k.Consume(t, 2, kafkaEventually) {
		if r.Headers[wire.HeaderID] != m.DedupID {
			t.Errorf("record header webhook-id = %q, want the DedupID %q", r.Headers[wire.HeaderID], m.DedupID)
		}
	}
}

// TestKafkaRefusals: each refusal kfake can give for real, its class, and no password in any
// error's text.
func TestKafkaRefusals(t *testing.T) {
	const password = "s3cret-kafka-PASSWORD"
	const readerPassword = "s3cret-reader-PASSWORD"
	k := brokertest.StartKafka(t,
		brokertest.KafkaSASL("admin", password),
		brokertest.KafkaReadOnlyUser("reader", readerPassword),
		brokertest.KafkaMaxMessageBytes(64<<10),
	)
	secret := kafkaSecret(t)
	large := kafkaMessage(t, secret, 0, "")
	noise := make([]byte, 128<<10) // random, so that compression does not shrink it below the limit
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	large.Body = []byte(`{"data":"` + base64.StdEncoding.EncodeToString(noise) + `"}`)
	cases := []struct {
		name  string
		topic string
		creds destination.Credentials
		m     broker.Message
		class string
	}{
		{"wrong password", brokertest.KafkaTopic, destination.Credentials{Username: "admin", Password: password + "-wrong"}, kafkaMessage(t, secret, 0, ""), broker.ClassBrokerAuth},
		{"unknown user", brokertest.KafkaTopic, destination.Credentials{Username: "nobody", Password: password}, kafkaMessage(t, secret, 0, ""), broker.ClassBrokerAuth},
		{"no write permission", brokertest.KafkaTopic, destination.Credentials{Username: "reader", Password: readerPassword}, kafkaMessage(t, secret, 0, ""), broker.ClassBrokerAuth},
		{"missing topic", "no-such-topic", destination.Credentials{Username: "admin", Password: password}, kafkaMessage(t, secret, 0, ""), broker.ClassBrokerMissing},
		{"record too large", brokertest.KafkaTopic, destination.Credentials{Username: "admin", Password: password}, large, broker.ClassBrokerRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target, _ := kafkaTarget(k, c.creds)
			target.Settings.Topic = c.topic
			p := openKafka(t, target)
			err := publish(t, p, c.m, kafkaEventually)
			r := broker.AsRefusal(err)
			if r == nil {
				t.Fatalf("Publish = %v, want a refusal of class %s", err, c.class)
			}
			t.Logf("%s: %s", r.Class, r.Message)
			if r.Class != c.class {
				t.Errorf("class %s (%s), want %s", r.Class, r.Message, c.class)
			}
			for _, text := range []string{err.Error(), r.Message, fmt.Sprintf("%+v", err)} {
				if strings.Contains(text, password) || strings.Contains(text, readerPassword) {
					t.Errorf("the error's text holds a password: %s", text)
				}
			}
		})
	}

	// The good credentials publish, so the refusals above were the broker's word on them.
	target, _ := kafkaTarget(k, destination.Credentials{Username: "admin", Password: password})
	if err := publish(t, openKafka(t, target), kafkaMessage(t, secret, 1, ""), kafkaEventually); err != nil {
		t.Fatalf("the superuser's publish: %v", err)
	}
	if n := k.Count(t); n != 1 {
		t.Errorf("the topic holds %d records, want the superuser's 1", n)
	}
}

// TestKafkaClose: Close is idempotent, and a Publish after it fails without reaching a broker.
func TestKafkaClose(t *testing.T) {
	k := brokertest.StartKafka(t)
	target, _ := kafkaTarget(k, destination.Credentials{})
	p, err := broker.OpenKafka(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	err = publish(t, p, kafkaMessage(t, kafkaSecret(t), 0, ""), kafkaEventually)
	if err == nil || broker.AsRefusal(err) != nil {
		t.Fatalf("Publish after Close = %v, want the closed client's error", err)
	}
	if n := k.Count(t); n != 0 {
		t.Errorf("the topic holds %d records after a closed publisher's Publish", n)
	}
}

// TestKafkaOpen: Open checks the URL and the settings without connecting, and a cluster that is
// down is no error of Open's.
func TestKafkaOpen(t *testing.T) {
	dial := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no dial expected") }
	for _, c := range []struct {
		url, topic string
		creds      destination.Credentials
		ok         bool
	}{
		{"kafka://127.0.0.1:1", "t", destination.Credentials{}, true},
		{"kafka://a.example:9092,b.example:9093", "t", destination.Credentials{}, true},
		{"kafka+tls://a.example,[2001:db8::1]:9093", "t", destination.Credentials{Username: "u", Password: "p"}, true},
		{"kafka://a.example:9092", "", destination.Credentials{}, false},
		{"http://a.example:9092", "t", destination.Credentials{}, false},
		// The URL as stored names the SASL user; a password never.
		{"kafka://u@a.example:9092", "t", destination.Credentials{Username: "u", Password: "p"}, true},
		{"kafka://u:p@a.example:9092", "t", destination.Credentials{Username: "u", Password: "p"}, false},
		{"kafka://a.example:9092?x=1", "t", destination.Credentials{}, false},
		{"kafka://a.example:port", "t", destination.Credentials{}, false},
		{"kafka://a.example:9092,", "t", destination.Credentials{}, false},
		{"kafka://a.example:9092", "t", destination.Credentials{Username: "u"}, false},
	} {
		p, err := broker.OpenKafka(context.Background(), broker.Target{
			URL: c.url, Settings: destination.Settings{Type: destination.Kafka, Topic: c.topic}, Credentials: c.creds, Dial: dial,
		})
		if (err == nil) != c.ok {
			t.Errorf("OpenKafka(%q, topic %q) = %v, want ok %v", c.url, c.topic, err, c.ok)
		}
		if p != nil {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}
