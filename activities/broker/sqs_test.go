//go:build integration

package broker_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/wire"
)

// These tests run against goaws (brokertest.StartSQS), a real SQS server of the query protocol
// run as a process. goaws checks no credentials, so the refusal of bad credentials is not
// provoked here (sqs_unit_test.go maps SQS's answers); it keeps its queues in memory, so a
// restart empties them.

// sqsSigningSecret signs the test deliveries as a webhook's secret does.
var sqsSigningSecret = wire.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("sqs-test-signing-secret-32-bytes"))

// sqsTarget is the Target of the queue at queueURL, with goaws's credentials and a plain HTTP
// client that follows no redirect, as the egress client.
func sqsTarget(queueURL string) broker.Target {
	return broker.Target{
		URL:         queueURL,
		Settings:    destination.Settings{Type: destination.SQS, Region: brokertest.SQSRegion, AccessKeyID: brokertest.SQSAccessKeyID},
		Credentials: destination.Credentials{SecretAccessKey: brokertest.SQSSecret, SessionToken: "sqs-session-token-secret"},
		HTTP: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
}

func openSQS(t *testing.T, target broker.Target) broker.Publisher {
	t.Helper()
	p, err := broker.OpenSQS(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sqsMessage is event n of webhook 7 as the delivery activity builds it: the Standard Webhooks
// headers under their lower-case names, signed with sqsSigningSecret.
func sqsMessage(t *testing.T, n int, orderingKey string) broker.Message {
	t.Helper()
	msgID := wire.MessageID(int64(n), 7)
	signedAt := time.Now()
	body := fmt.Appendf(nil, `{"type":"order.created","timestamp":"2026-12-06T20:00:00Z","data":{"n":%d,"text":"caf\u00e9 \"quoted\" <tag> & more"}}`, n)
	sig, err := wire.StandardSignature(msgID, signedAt, body, sqsSigningSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := wire.DeliveryHeader(msgID, "order.created", "webhookd/test", signedAt)
	h.Set(wire.HeaderSignature, sig)
	h.Set(wire.HeaderSequence, fmt.Sprint(n))
	headers := map[string]string{}
	for name := range h {
		headers[strings.ToLower(name)] = h.Get(name)
	}
	return broker.Message{Body: body, Headers: headers, DedupID: msgID, OrderingKey: orderingKey}
}

func publish(t *testing.T, p broker.Publisher, m broker.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Publish(ctx, m)
}

// TestSQSDelivers publishes 20 messages into a standard and a FIFO queue and reads them back:
// each body byte for byte, every header as an attribute, the signature verified by the Standard
// Webhooks library, and on the FIFO queue in the order sent (one ordering key, one group).
func TestSQSDelivers(t *testing.T) {
	s := brokertest.StartSQS(t)
	wh, err := standardwebhooks.NewWebhook(sqsSigningSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, queue := range []struct {
		name, url, key string
	}{
		{"standard", s.URL(), ""},
		{"fifo", s.FIFOURL(), "customer-42"},
	} {
		t.Run(queue.name, func(t *testing.T) {
			p := openSQS(t, sqsTarget(queue.url))
			sent := map[string]broker.Message{}
			var order []string
			for n := 1; n <= 20; n++ {
				m := sqsMessage(t, n, queue.key)
				if err := publish(t, p, m); err != nil {
					t.Fatalf("publish %d: %v", n, err)
				}
				sent[m.DedupID] = m
				order = append(order, m.DedupID)
			}
			got := s.ConsumeQueue(t, queue.url, 20, 60*time.Second)
			if len(got) != 20 {
				t.Fatalf("consumed %d messages, want 20", len(got))
			}
			for i, r := range got {
				id := r.Headers[wire.HeaderID]
				m, ok := sent[id]
				if !ok {
					t.Errorf("message %d: webhook-id %q was not sent", i, id)
					continue
				}
				delete(sent, id)
				if string(r.Body) != string(m.Body) {
					t.Errorf("%s: body %q, sent %q", id, r.Body, m.Body)
				}
				for name, value := range m.Headers {
					if r.Headers[name] != value {
						t.Errorf("%s: attribute %s = %q, sent %q", id, name, r.Headers[name], value)
					}
				}
				h := http.Header{}
				for name, value := range r.Headers {
					h.Set(name, value)
				}
				if err := wh.Verify(r.Body, h); err != nil {
					t.Errorf("%s: the Standard Webhooks library refuses the signature: %v", id, err)
				}
				if queue.key != "" && id != order[i] {
					t.Errorf("message %d of the FIFO group is %s, want %s", i, id, order[i])
				}
			}
		})
	}
}

// TestSQSFIFODeduplicates publishes one delivery twice into the FIFO queue, as a retry after a
// lost answer does: its DedupID is the MessageDeduplicationId, and the queue keeps one. A message
// of another DedupID, published after, shows that the consumer read past where a duplicate would
// be.
func TestSQSFIFODeduplicates(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.FIFOURL()))
	m := sqsMessage(t, 1, "")
	for range 2 {
		if err := publish(t, p, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(t, p, sqsMessage(t, 2, "")); err != nil {
		t.Fatal(err)
	}
	got := s.ConsumeQueue(t, s.FIFOURL(), 3, 10*time.Second)
	ids := []string{}
	for _, r := range got {
		ids = append(ids, r.Headers[wire.HeaderID])
	}
	if strings.Join(ids, " ") != "msg_1_7 msg_2_7" && strings.Join(ids, " ") != "msg_2_7 msg_1_7" {
		t.Errorf("consumed %v, want msg_1_7 once and msg_2_7", ids)
	}
}

// TestSQSFIFOGroups shows the message group of each FIFO message: the ordering key, else the
// destination's MessageGroupID, else the DedupID. goaws does not return a message's group, but a
// message received and not yet deleted holds back the rest of its group, which ReceiveHeld shows.
func TestSQSFIFOGroups(t *testing.T) {
	s := brokertest.StartSQS(t)
	for _, c := range []struct {
		name     string
		settings string // the destination's MessageGroupID
		keys     []string
		want     []string // the webhook-ids received while each first one is held
	}{
		// Keys a, a, b, none: the second a waits behind the first; the one without a key has a
		// group of its own (its DedupID).
		{"ordering key", "", []string{"a", "a", "b", ""}, []string{"msg_1_7", "msg_3_7", "msg_4_7"}},
		// Without keys, the destination's group holds all but the first back.
		{"destination group", "all", []string{"", "", ""}, []string{"msg_1_7"}},
		// Without keys or a group, each message is a group of its own.
		{"dedup id", "", []string{"", "", ""}, []string{"msg_1_7", "msg_2_7", "msg_3_7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.Restart(t) // empty queues, no group held
			target := sqsTarget(s.FIFOURL())
			target.Settings.MessageGroupID = c.settings
			p := openSQS(t, target)
			for i, key := range c.keys {
				if err := publish(t, p, sqsMessage(t, i+1, key)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for range c.keys {
				if r := s.ReceiveHeld(t, s.FIFOURL()); r != nil {
					got = append(got, r.Headers[wire.HeaderID])
				}
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("received %v while holding each, want %v", got, c.want)
			}
		})
	}
}

// TestSQSBrokerDown kills goaws: a publish fails within its deadline with the network error,
// which egress.Classify names "refused", and no Refusal. Restarted, the same Publisher publishes
// again.
func TestSQSBrokerDown(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.URL()))
	if err := publish(t, p, sqsMessage(t, 1, "")); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	err := publish(t, p, sqsMessage(t, 2, ""))
	if err == nil {
		t.Fatal("publish to a killed goaws succeeded")
	}
	if r := broker.AsRefusal(err); r != nil {
		t.Errorf("a broker down is no refusal: %v", r)
	}
	if class, msg := egress.Classify(err); class != egress.ClassRefused {
		t.Errorf("class %q (%s), want %q: %v", class, msg, egress.ClassRefused, err)
	}
	assertNoSecret(t, err)

	s.Restart(t)
	if err := publish(t, p, sqsMessage(t, 3, "")); err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	got := s.Consume(t, 1, 30*time.Second)
	if len(got) != 1 || got[0].Headers[wire.HeaderID] != "msg_3_7" {
		t.Errorf("after the restart consumed %v, want msg_3_7", got)
	}
}

// TestSQSDeadline freezes goaws (SIGSTOP): the kernel still takes the connection, and nothing
// answers. The publish ends at its context's deadline, a timeout by egress.Classify.
func TestSQSDeadline(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.URL()))
	s.Freeze(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := p.Publish(ctx, sqsMessage(t, 1, ""))
	if class, _ := egress.Classify(err); class != egress.ClassTimeout {
		t.Errorf("class %q, want %q: %v", class, egress.ClassTimeout, err)
	}
	s.Thaw(t)
	if err := publish(t, p, sqsMessage(t, 2, "")); err != nil {
		t.Errorf("publish after goaws thawed: %v", err)
	}
}

// TestSQSMissingQueue publishes to a queue goaws does not have: ClassBrokerMissing.
func TestSQSMissingQueue(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.QueueURL("no-such-queue")))
	err := publish(t, p, sqsMessage(t, 1, ""))
	r := broker.AsRefusal(err)
	if r == nil || r.Class != broker.ClassBrokerMissing {
		t.Fatalf("publish to a missing queue: %v, want a %s refusal", err, broker.ClassBrokerMissing)
	}
	if !strings.Contains(r.Message, "QueueDoesNotExist") {
		t.Errorf("message %q names no SQS error code", r.Message)
	}
	assertNoSecret(t, err)
}

// TestSQSRefusesAttributes refuses, before sending, headers SQS would refuse: more than 10, or a
// name it does not take. The refusal names the header, never its value.
func TestSQSRefusesAttributes(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.URL()))
	m := sqsMessage(t, 1, "")
	m.Headers["x-api-key!"] = "header-value-secret"
	err := publish(t, p, m)
	if r := broker.AsRefusal(err); r == nil || r.Class != broker.ClassBrokerRefused || !strings.Contains(r.Message, `"x-api-key!"`) || strings.Contains(r.Message, "header-value-secret") {
		t.Errorf("a header name SQS refuses: %v", err)
	}
	m = sqsMessage(t, 2, "")
	for i := range 4 {
		m.Headers[fmt.Sprintf("x-custom-%d", i)] = "v"
	}
	err = publish(t, p, m)
	if r := broker.AsRefusal(err); r == nil || r.Class != broker.ClassBrokerRefused || !strings.Contains(r.Message, "at most 10") {
		t.Errorf("11 headers: %v", err)
	}
	if got := s.Consume(t, 1, 2*time.Second); len(got) != 0 {
		t.Errorf("a refused message reached the queue: %v", got)
	}
}

// TestSQSClose: a closed Publisher refuses to publish, and Close again is no error.
func TestSQSClose(t *testing.T) {
	s := brokertest.StartSQS(t)
	p := openSQS(t, sqsTarget(s.URL()))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := publish(t, p, sqsMessage(t, 1, "")); err == nil {
		t.Error("a closed Publisher published")
	}
}

func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for _, secret := range []string{brokertest.SQSSecret, "sqs-session-token-secret"} {
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error names a secret: %v", err)
		}
		if r := broker.AsRefusal(err); r != nil && r.Err != nil && strings.Contains(r.Err.Error(), secret) {
			t.Errorf("the refusal's cause names a secret: %v", r.Err)
		}
	}
}
