//go:build integration

package broker_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/wire"
)

const rabbitSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestRabbitMQ publishes into a real RabbitMQ broker (the Debian package, started by brokertest
// as a process of its own), shared by the subtests; the last one kills it and starts it again.
func TestRabbitMQ(t *testing.T) {
	rmq := brokertest.StartRabbitMQ(t)
	t.Run("Deliveries", func(t *testing.T) { testRabbitDeliveries(t, rmq) })
	t.Run("MessageID", func(t *testing.T) { testRabbitMessageID(t, rmq) })
	t.Run("Refusals", func(t *testing.T) { testRabbitRefusals(t, rmq) })
	t.Run("AddressPolicy", func(t *testing.T) { testRabbitAddressPolicy(t, rmq) })
	t.Run("Close", func(t *testing.T) { testRabbitClose(t, rmq) })
	t.Run("TLS", func(t *testing.T) { testRabbitTLS(t, rmq) })
	t.Run("Unanswered", func(t *testing.T) { testRabbitUnanswered(t, rmq) })
	t.Run("KillAndRestart", func(t *testing.T) { testRabbitKillAndRestart(t, rmq) })
}

// rabbitTarget is the publisher's target on rmq, dialed through the address policy with
// development's switch for private addresses.
func rabbitTarget(rmq *brokertest.RabbitMQ, exchange, key string) broker.Target {
	dialer := &net.Dialer{Control: egress.AddressPolicy{AllowPrivate: true}.DialControl}
	return broker.Target{
		URL:         rmq.URL(),
		Settings:    destination.Settings{Type: destination.RabbitMQ, Exchange: exchange, RoutingKey: key},
		Credentials: destination.Credentials{Password: rmq.Password()},
		Dial:        dialer.DialContext,
	}
}

func openRabbit(t *testing.T, target broker.Target) broker.Publisher {
	t.Helper()
	p, err := broker.OpenRabbitMQ(context.Background(), target)
	if err != nil {
		t.Fatalf("OpenRabbitMQ: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	return p
}

// signedMessage is delivery n as the delivery activity makes it: the headers of an HTTPS
// delivery, by lower-case name, signed with rabbitSecret.
func signedMessage(t *testing.T, n int) broker.Message {
	t.Helper()
	msgID := wire.MessageID(int64(1000+n), 7)
	body := []byte(fmt.Sprintf(`{"type":"order.created","data":{"n":%d,"note":"ünïcode \u2028 and \"quotes\""}}`, n))
	ts := time.Now()
	signature, err := wire.StandardSignature(msgID, ts, body, rabbitSecret)
	if err != nil {
		t.Fatal(err)
	}
	header := wire.DeliveryHeader(msgID, "order.created", "webhookd-test", ts)
	header.Set(wire.HeaderSignature, signature)
	header.Set(wire.HeaderSequence, fmt.Sprint(n+1))
	headers := make(map[string]string, len(header))
	for name, values := range header {
		headers[strings.ToLower(name)] = values[0]
	}
	return broker.Message{Body: body, Headers: headers, DedupID: msgID}
}

// (a) 20 messages, published concurrently, come out byte for byte with every header, and the
// Standard Webhooks library verifies each.
func testRabbitDeliveries(t *testing.T, rmq *brokertest.RabbitMQ) {
	p := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	sent := map[string]broker.Message{}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for n := range 20 {
		m := signedMessage(t, n)
		sent[m.DedupID] = m
		wg.Go(func() { errs <- publish(t, p, m, 30*time.Second) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	wh, err := standardwebhooks.NewWebhook(rabbitSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range rmq.Consume(t, 20, time.Minute) {
		id := got.Headers[wire.HeaderID]
		want, ok := sent[id]
		if !ok {
			t.Fatalf("consumed a message with webhook-id %q, not one of those published", id)
		}
		delete(sent, id)
		if !bytes.Equal(got.Body, want.Body) {
			t.Errorf("%s: body %q, want %q", id, got.Body, want.Body)
		}
		for name, value := range want.Headers {
			if got.Headers[name] != value {
				t.Errorf("%s: header %s = %q, want %q", id, name, got.Headers[name], value)
			}
		}
		if got.Key != brokertest.RabbitQueue {
			t.Errorf("%s: routing key %q, want %q", id, got.Key, brokertest.RabbitQueue)
		}
		h := http.Header{}
		for name, value := range got.Headers {
			h.Set(name, value)
		}
		if err := wh.Verify(got.Body, h); err != nil {
			t.Errorf("%s: Standard Webhooks verification: %v", id, err)
		}
	}
	if len(sent) != 0 {
		t.Errorf("%d messages published and not consumed", len(sent))
	}
}

// (c) RabbitMQ has no de-duplication of its own: the same DedupID twice is two messages, each
// with the webhook-id as its message_id, by which a consumer drops the second. They are
// persistent and typed as JSON.
func testRabbitMessageID(t *testing.T, rmq *brokertest.RabbitMQ) {
	// The default exchange routes by queue name.
	p := openRabbit(t, rabbitTarget(rmq, "", brokertest.RabbitQueue))
	m := signedMessage(t, 100)
	for range 2 {
		if err := publish(t, p, m, 30*time.Second); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	for _, d := range rmq.ConsumeDeliveries(t, brokertest.RabbitQueue, 2, time.Minute) {
		if d.MessageId != m.DedupID {
			t.Errorf("message_id %q, want the DedupID %q", d.MessageId, m.DedupID)
		}
		if d.DeliveryMode != 2 {
			t.Errorf("delivery mode %d, want 2 (persistent)", d.DeliveryMode)
		}
		if d.ContentType != "application/json" {
			t.Errorf("content type %q, want application/json", d.ContentType)
		}
	}
}

// (d) Each refusal the broker can give, for real, with its class; (e) no error text names a
// password.
func testRabbitRefusals(t *testing.T, rmq *brokertest.RabbitMQ) {
	reader := rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue)
	reader.URL = rmq.UserURL(brokertest.RabbitReader)
	reader.Credentials.Password = rmq.UserPassword(brokertest.RabbitReader)
	badPassword := rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue)
	badPassword.Credentials.Password = "not-" + rmq.Password()
	noVhost := rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue)
	noVhost.URL = strings.TrimSuffix(rmq.URL(), brokertest.RabbitVhost) + "absent"

	for _, c := range []struct {
		name   string
		target broker.Target
		class  string
		busy   bool
		says   string
	}{
		{"missing exchange", rabbitTarget(rmq, "absent", brokertest.RabbitQueue), broker.ClassBrokerMissing, false, "no exchange 'absent'"},
		{"unbound routing key", rabbitTarget(rmq, brokertest.RabbitExchange, "unbound"), broker.ClassBrokerMissing, false, `no queue is bound for routing key "unbound"`},
		{"missing queue on the default exchange", rabbitTarget(rmq, "", "absent"), broker.ClassBrokerMissing, false, `no queue is named "absent"`},
		{"full queue (nack)", rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitFullQueue), broker.ClassBrokerRefused, true, "negative confirm"},
		{"no write permission", reader, broker.ClassBrokerAuth, false, "ACCESS_REFUSED"},
		{"wrong password", badPassword, broker.ClassBrokerAuth, false, "refused the login"},
		{"missing virtual host", noVhost, broker.ClassBrokerMissing, false, "absent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := openRabbit(t, c.target)
			// Twice: a refusal leaves the publisher usable, and refuses again.
			for range 2 {
				err := publish(t, p, signedMessage(t, 1), 30*time.Second)
				r := broker.AsRefusal(err)
				if r == nil {
					t.Fatalf("Publish: %v, want a refusal of class %s", err, c.class)
				}
				t.Logf("%s (busy %t): %s", r.Class, r.Busy, r.Message)
				if r.Class != c.class || r.Busy != c.busy || !strings.Contains(r.Message, c.says) {
					t.Errorf("refusal %s (busy %t): %q; want %s (busy %t) saying %q", r.Class, r.Busy, r.Message, c.class, c.busy, c.says)
				}
				for _, user := range []string{brokertest.RabbitPublisher, brokertest.RabbitReader} {
					if pw := rmq.UserPassword(user); strings.Contains(err.Error(), pw) || strings.Contains(fmt.Sprintf("%+v", err), pw) {
						t.Errorf("the error names %s's password: %v", user, err)
					}
				}
			}
		})
	}

	// After a refused publish closed its channel, the publisher's next publish goes through.
	t.Run("publishes after a refusal", func(t *testing.T) {
		p := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
		if err := publish(t, p, signedMessage(t, 2), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		rmq.Consume(t, 1, time.Minute)
	})
}

// The publisher dials through Target.Dial: webhookd's production address policy refuses the
// broker's loopback address, and egress.Classify names it blocked.
func testRabbitAddressPolicy(t *testing.T, rmq *brokertest.RabbitMQ) {
	target := rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue)
	target.Dial = (&net.Dialer{Control: egress.AddressPolicy{}.DialControl}).DialContext
	err := publish(t, openRabbit(t, target), signedMessage(t, 3), 30*time.Second)
	if class, msg := egress.Classify(err); class != egress.ClassBlocked || broker.AsRefusal(err) != nil {
		t.Fatalf("Publish: %v (class %s: %s), want class %s and no refusal", err, class, msg, egress.ClassBlocked)
	}
}

// (b) The broker killed with SIGKILL: a publish fails, not as a refusal, and egress.Classify
// names it refused (the connection's loss may show first, as network); started again on the same
// port, the same publisher publishes again, and the message confirmed before the kill is still
// there.
func testRabbitKillAndRestart(t *testing.T, rmq *brokertest.RabbitMQ) {
	p := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	before := signedMessage(t, 10)
	if err := publish(t, p, before, 30*time.Second); err != nil {
		t.Fatalf("Publish before the kill: %v", err)
	}
	rmq.Kill()
	// Open connects nothing, so a broker that is down does not fail it.
	opened := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))

	var classes []string
	for len(classes) < 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.Publish(ctx, signedMessage(t, 11))
		ctxErr := ctx.Err()
		cancel()
		if err == nil {
			t.Fatal("Publish with the broker killed: no error")
		}
		if ctxErr != nil {
			t.Fatalf("Publish with the broker killed returned after its deadline: %v", err)
		}
		if broker.AsRefusal(err) != nil {
			t.Fatalf("Publish with the broker killed: a refusal: %v", err)
		}
		if strings.Contains(err.Error(), rmq.Password()) {
			t.Errorf("the error names the password: %v", err)
		}
		class, msg := egress.Classify(err)
		t.Logf("with the broker killed: %s (%s)", class, msg)
		classes = append(classes, class)
		if class == egress.ClassRefused {
			break
		}
		if class != egress.ClassNetwork {
			t.Fatalf("Publish with the broker killed: %v, class %s; want %s (or %s while the lost connection shows)", err, class, egress.ClassRefused, egress.ClassNetwork)
		}
	}
	if classes[len(classes)-1] != egress.ClassRefused {
		t.Fatalf("classes with the broker killed: %v, want %s in the end", classes, egress.ClassRefused)
	}

	rmq.Restart(t)
	after := signedMessage(t, 12)
	if err := publish(t, p, after, 30*time.Second); err != nil {
		t.Fatalf("Publish after the restart: %v", err)
	}
	// The publisher opened while the broker was down connects on its first Publish.
	afterOpened := signedMessage(t, 13)
	if err := publish(t, opened, afterOpened, 30*time.Second); err != nil {
		t.Fatalf("Publish after the restart, by a publisher opened during the kill: %v", err)
	}
	var ids []string
	for _, got := range rmq.Consume(t, 3, time.Minute) {
		ids = append(ids, got.Headers[wire.HeaderID])
	}
	if want := []string{before.DedupID, after.DedupID, afterOpened.DedupID}; !slices.Equal(ids, want) {
		t.Errorf("consumed %v, want the message confirmed before the kill, then those after the restart: %v", ids, want)
	}
}

// A broker that answers nothing (SIGSTOP): Publish returns at its ctx's deadline, on a connection
// it had and on one it opens (whose handshake waits), and egress.Classify names it a timeout.
// Continued, the broker takes the publisher's next message.
func testRabbitUnanswered(t *testing.T, rmq *brokertest.RabbitMQ) {
	connected := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	if err := publish(t, connected, signedMessage(t, 20), 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	rmq.Consume(t, 1, time.Minute)
	fresh := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	// A message larger than the sockets' buffers: its write waits for the broker to read.
	connectedLarge := openRabbit(t, rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	if err := publish(t, connectedLarge, signedMessage(t, 23), 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	rmq.Consume(t, 1, time.Minute)
	large := signedMessage(t, 24)
	large.Body = bytes.Repeat([]byte("x"), 64<<20)

	rmq.Pause(t)
	paused := true
	defer func() {
		if paused {
			rmq.Resume(t)
		}
	}()
	unanswered := signedMessage(t, 21)
	for name, p := range map[string]broker.Publisher{"connected": connected, "connecting": fresh} {
		err := publishBounded(t, p, unanswered, 2*time.Second)
		class, msg := egress.Classify(err)
		t.Logf("%s, the broker stopped: %s (%s)", name, class, msg)
		if class != egress.ClassTimeout || broker.AsRefusal(err) != nil {
			t.Errorf("%s, the broker stopped: Publish: %v (class %s), want class %s and no refusal", name, err, class, egress.ClassTimeout)
		}
	}
	// The write of the large message stops at the deadline: the error is the deadline's, not
	// a later one of the connection (its heartbeat's, some 30 s on).
	err := publishBounded(t, connectedLarge, large, 2*time.Second)
	class, msg := egress.Classify(err)
	t.Logf("connected, a large message, the broker stopped: %s (%s)", class, msg)
	if !errors.Is(err, context.DeadlineExceeded) || broker.AsRefusal(err) != nil {
		t.Errorf("connected, a large message, the broker stopped: Publish: %v (class %s), want the ctx's deadline and no refusal", err, class)
	}
	rmq.Resume(t)
	paused = false

	next := signedMessage(t, 22)
	for name, p := range map[string]broker.Publisher{"connected": connected, "connecting": fresh, "connected, a large message": connectedLarge} {
		if err := publish(t, p, next, 30*time.Second); err != nil {
			t.Fatalf("%s, the broker continued: Publish: %v", name, err)
		}
	}
	// The unanswered message was in the connected publisher's socket: the broker took it when it
	// continued (at least once; its message_id tells it from a retry's).
	count := map[string]int{}
	for _, got := range rmq.Consume(t, 4, time.Minute) {
		count[got.Headers[wire.HeaderID]]++
	}
	if count[unanswered.DedupID] != 1 || count[next.DedupID] != 3 {
		t.Errorf("consumed %v, want %s once and %s three times", count, unanswered.DedupID, next.DedupID)
	}
	if n := rmq.Depth(t, brokertest.RabbitQueue); n != 0 {
		t.Errorf("%d more messages in %s (the large one, cut at its deadline, should not be)", n, brokertest.RabbitQueue)
	}
}

// publishBounded publishes with a ctx of timeout, and fails the test when Publish has not
// returned a generous minute after it: a Publish that ignores its deadline.
func publishBounded(t *testing.T, p broker.Publisher, m broker.Message, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Publish(ctx, m) }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout + time.Minute):
		t.Fatalf("Publish has not returned a minute after its deadline (%s)", timeout)
		return nil
	}
}

// amqps:// verifies the broker's certificate: one that a private authority signed fails the
// handshake, and egress.Classify names it tls, not a refusal.
func testRabbitTLS(t *testing.T, rmq *brokertest.RabbitMQ) {
	target := rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue)
	target.URL = rmq.TLSURL()
	err := publish(t, openRabbit(t, target), signedMessage(t, 30), 30*time.Second)
	class, msg := egress.Classify(err)
	t.Logf("amqps, a private authority: %s (%s)", class, msg)
	if class != egress.ClassTLS || broker.AsRefusal(err) != nil {
		t.Fatalf("Publish: %v (class %s), want class %s and no refusal", err, class, egress.ClassTLS)
	}
	// The egress client's roots (the operator's extra CA file among them) verify it: the same
	// broker, its authority among the roots of Target.HTTP's transport, takes the message.
	target.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: rmq.CA().Pool()}}}
	trusted := signedMessage(t, 31)
	if err := publish(t, openRabbit(t, target), trusted, 30*time.Second); err != nil {
		t.Fatalf("amqps with the authority among the egress client's roots: %v", err)
	}
	if got := rmq.Consume(t, 1, time.Minute); got[0].Headers[wire.HeaderID] != trusted.DedupID {
		t.Fatalf("consumed %v, want the message published over amqps", got[0].Headers)
	}
}

// Close while publishes are in flight: each publish ends (confirmed, or failed without a
// refusal), a second Close is nil, and a Publish after Close fails.
func testRabbitClose(t *testing.T, rmq *brokertest.RabbitMQ) {
	p, err := broker.OpenRabbitMQ(context.Background(), rabbitTarget(rmq, brokertest.RabbitExchange, brokertest.RabbitQueue))
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(t, p, signedMessage(t, 40), 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	var wg sync.WaitGroup
	var confirmed sync.Map
	for n := range 10 {
		m := signedMessage(t, 41+n)
		wg.Go(func() {
			err := publishBounded(t, p, m, 30*time.Second)
			if err == nil {
				confirmed.Store(m.DedupID, true)
			} else if broker.AsRefusal(err) != nil {
				t.Errorf("Publish during Close: a refusal: %v", err)
			}
		})
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := publish(t, p, signedMessage(t, 60), 30*time.Second); err == nil {
		t.Error("Publish after Close: no error")
	}
	// The broker handled every frame sent before Close's goodbye: the queue holds every
	// confirmed message, and may hold some sent and not yet confirmed.
	got := map[string]bool{}
	for _, r := range rmq.Consume(t, rmq.Depth(t, brokertest.RabbitQueue), time.Minute) {
		got[r.Headers[wire.HeaderID]] = true
	}
	confirmed.Range(func(id, _ any) bool {
		if !got[id.(string)] {
			t.Errorf("%s was confirmed and is not in the queue", id)
		}
		return true
	})
	t.Logf("%d of 10 confirmed; %d in the queue besides the first", countMap(&confirmed), len(got)-1)
}

func countMap(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}
