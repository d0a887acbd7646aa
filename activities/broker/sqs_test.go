//go:build integration

package broker

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/wire"
)

// These tests run against goaws (brokertest.StartSQS), a real SQS server of the query protocol
// run as a process. goaws checks no credentials and never throttles, so TestSQSAnswers replays
// SQS's own error answers for those; it keeps its queues in memory, so a restart empties them.

// sqsSigningSecret signs the test deliveries as a webhook's secret does.
var sqsSigningSecret = wire.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("sqs-test-signing-secret-32-bytes"))

// sqsTarget is the Target of the queue at queueURL, with goaws's credentials and a plain HTTP
// client that follows no redirect, as the egress client.
func sqsTarget(queueURL string) Target {
	return Target{
		URL:         queueURL,
		Settings:    destination.Settings{Type: destination.SQS, Region: brokertest.SQSRegion, AccessKeyID: brokertest.SQSAccessKeyID},
		Credentials: destination.Credentials{SecretAccessKey: brokertest.SQSSecret, SessionToken: "sqs-session-token-secret"},
		HTTP: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}
}

func openSQS(t *testing.T, target Target) Publisher {
	t.Helper()
	p, err := OpenSQS(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sqsMessage is event n of webhook 7 as the delivery activity builds it: the Standard Webhooks
// headers under their lower-case names, signed with sqsSigningSecret.
func sqsMessage(t *testing.T, n int, orderingKey string) Message {
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
	return Message{Body: body, Headers: headers, DedupID: msgID, OrderingKey: orderingKey}
}

func publish(t *testing.T, p Publisher, m Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Publish(ctx, m)
}

// TestSQSDelivers publishes 20 messages into a standard and a FIFO queue and reads them back:
// each body byte for byte, every header as an attribute, the signature verified by the Standard
// Webhooks library; on the standard queue published all at once through one Publisher, on the
// FIFO queue one after the other and consumed in that order (one ordering key, one group).
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
			sent := map[string]Message{}
			var order []string
			var wg sync.WaitGroup
			for n := 1; n <= 20; n++ {
				m := sqsMessage(t, n, queue.key)
				sent[m.DedupID] = m
				order = append(order, m.DedupID)
				if queue.key != "" { // one group, in order
					if err := publish(t, p, m); err != nil {
						t.Fatalf("publish %d: %v", n, err)
					}
					continue
				}
				wg.Go(func() { // no order: all at once, on one Publisher
					if err := publish(t, p, m); err != nil {
						t.Errorf("publish %d: %v", n, err)
					}
				})
			}
			wg.Wait()
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
	got := s.ConsumeQueue(t, s.FIFOURL(), 3, 3*time.Second) // all three were acknowledged: the wait is for a duplicate only
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
// which egress.Classify names "refused" or "network", and no Refusal. Restarted, the same Publisher publishes
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
	if r := AsRefusal(err); r != nil {
		t.Errorf("a broker down is no refusal: %v", r)
	}
	// Refused when the publish dials anew; network (a broken pipe, a reset) when it meets the
	// connection kept alive from the first publish, which the kill cut: CI has seen both.
	if class, msg := egress.Classify(err); class != egress.ClassRefused && class != egress.ClassNetwork {
		t.Errorf("class %q (%s), want %q or %q: %v", class, msg, egress.ClassRefused, egress.ClassNetwork, err)
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
	r := AsRefusal(err)
	if r == nil || r.Class != ClassBrokerMissing {
		t.Fatalf("publish to a missing queue: %v, want a %s refusal", err, ClassBrokerMissing)
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
	if r := AsRefusal(err); r == nil || r.Class != ClassBrokerRefused || !strings.Contains(r.Message, `"x-api-key!"`) || strings.Contains(r.Message, "header-value-secret") {
		t.Errorf("a header name SQS refuses: %v", err)
	}
	m = sqsMessage(t, 2, "")
	for i := range 4 {
		m.Headers[fmt.Sprintf("x-custom-%d", i)] = "v"
	}
	err = publish(t, p, m)
	if r := AsRefusal(err); r == nil || r.Class != ClassBrokerRefused || !strings.Contains(r.Message, "at most 10") {
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
		if r := AsRefusal(err); r != nil && r.Err != nil && strings.Contains(r.Err.Error(), secret) {
			t.Errorf("the refusal's cause names a secret: %v", r.Err)
		}
	}
}

// TestSQSAnswers replays SQS's error answers (query protocol, as AWS documents and sends them)
// that goaws never gives, since it checks no credential and never throttles: each is classed, and
// the Refusal's text names the code and request id but never SQS's own message, which for
// SignatureDoesNotMatch echoes the canonical request with its session token.
func TestSQSAnswers(t *testing.T) {
	const requestID = "b0fd5a0b-1c7e-5d3f-9f1a-3c2a7e0e4b11"
	for _, c := range []struct {
		status      int
		code, class string
		busy        bool
	}{
		{403, "InvalidClientTokenId", ClassBrokerAuth, false},
		{403, "SignatureDoesNotMatch", ClassBrokerAuth, false},
		{403, "AccessDenied", ClassBrokerAuth, false},
		{400, "ExpiredToken", ClassBrokerAuth, false},
		{400, "KMS.AccessDeniedException", ClassBrokerAuth, false},
		{400, "AWS.SimpleQueueService.NonExistentQueue", ClassBrokerMissing, false},
		{400, "RequestThrottled", ClassBrokerRefused, true},
		{400, "KMS.ThrottlingException", ClassBrokerRefused, true},
		{503, "ServiceUnavailable", ClassBrokerRefused, true},
		{500, "InternalError", ClassBrokerRefused, true},
		{400, "InvalidParameterValue", ClassBrokerRefused, false},
		{400, "InvalidMessageContents", ClassBrokerRefused, false},
	} {
		t.Run(c.code, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				token := r.Header.Get("X-Amz-Security-Token")
				w.Header().Set("Content-Type", "text/xml")
				w.Header().Set("X-Amzn-Requestid", requestID)
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>Sender</Type><Code>%s</Code><Message>The Canonical String for this request should have been 'POST / x-amz-security-token:%s' with attribute webhook-signature %s</Message><Detail/></Error><RequestId>%s</RequestId></ErrorResponse>`,
					c.code, token, r.FormValue("MessageAttribute.1.Value.StringValue"), requestID)
			}))
			defer srv.Close()
			p := openSQS(t, sqsTarget(srv.URL+"/123456789012/webhooks"))
			err := publish(t, p, sqsMessage(t, 1, ""))
			r := AsRefusal(err)
			if r == nil {
				t.Fatalf("%d %s: %v, want a refusal", c.status, c.code, err)
			}
			if r.Class != c.class || r.Busy != c.busy {
				t.Errorf("%d %s: class %s busy %v, want %s busy %v", c.status, c.code, r.Class, r.Busy, c.class, c.busy)
			}
			if !strings.Contains(r.Message, requestID) {
				t.Errorf("message %q names no request id", r.Message)
			}
			if strings.Contains(r.Message, "Canonical") || strings.Contains(r.Err.Error(), "Canonical") {
				t.Errorf("the refusal repeats SQS's message: %q (%v)", r.Message, r.Err)
			}
			assertNoSecret(t, err)
		})
	}
}

// TestSQSNotSQS publishes to servers at the queue URL that are not SQS: each was reached and did
// not take the message as SQS does, so each is a refusal, never an acknowledgement, and its page
// is not shown. An endless answer is read no further than a bound.
func TestSQSNotSQS(t *testing.T) {
	const sendResult = `<SendMessageResponse><SendMessageResult><MD5OfMessageBody>%s</MD5OfMessageBody><MessageId>5fea7756-0ea4-451a-a703-a558b933e274</MessageId></SendMessageResult></SendMessageResponse>`
	for name, c := range map[string]struct {
		status int
		body   func(w http.ResponseWriter, body string)
		want   string
	}{
		"a 502 page": {http.StatusBadGateway, func(w http.ResponseWriter, _ string) {
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}, "without an SQS error"},
		"200 and nothing": {http.StatusOK, func(http.ResponseWriter, string) {}, "no message id"},
		"200 and another digest": {http.StatusOK, func(w http.ResponseWriter, _ string) {
			fmt.Fprintf(w, sendResult, "0123456789abcdef0123456789abcdef")
		}, "MD5"},
		"200 and no end": {http.StatusOK, func(w http.ResponseWriter, body string) {
			fmt.Fprintf(w, "<SendMessageResponse><SendMessageResult><MD5OfMessageBody>%x</MD5OfMessageBody>", md5.Sum([]byte(body)))
			for range 1 << 10 { // 1 MiB of a comment, at most
				if _, err := w.Write([]byte("<!--" + strings.Repeat("x", 1017) + "-->")); err != nil {
					return
				}
			}
		}, "exceeded 64 KiB"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				c.body(w, r.FormValue("MessageBody"))
			}))
			defer srv.Close()
			err := publish(t, openSQS(t, sqsTarget(srv.URL+"/123456789012/webhooks")), sqsMessage(t, 1, ""))
			r := AsRefusal(err)
			if r == nil || r.Class != ClassBrokerRefused || r.Busy || !strings.Contains(r.Message, c.want) || strings.Contains(r.Message, "html") {
				t.Errorf("%v, want a refusal saying %q", err, c.want)
			}
		})
	}
	// The bound is no obstacle to SQS's own answer, which TestSQSDelivers reads.
}

// TestSQSOpen: the region comes from the settings or the queue URL's host; a URL that names no
// queue, a host that names no region without one set, or missing keys fail Open.
func TestSQSOpen(t *testing.T) {
	for host, region := range map[string]string{
		"sqs.eu-west-1.amazonaws.com":                       "eu-west-1",
		"SQS.us-east-2.amazonaws.com":                       "us-east-2",
		"sqs.cn-north-1.amazonaws.com.cn":                   "cn-north-1",
		"ap-south-1.queue.amazonaws.com":                    "ap-south-1",
		"vpce-0a1b2c-3d4e.sqs.us-west-2.vpce.amazonaws.com": "us-west-2",
		"127.0.0.1:4100":                                    "",
		"sqs.example.com":                                   "",
	} {
		if got := regionOfHost(strings.Split(host, ":")[0]); got != region {
			t.Errorf("region of %s: %q, want %q", host, got, region)
		}
	}
	ok := sqsTarget("https://sqs.eu-west-1.amazonaws.com/123456789012/webhooks")
	ok.Settings.Region = ""
	if _, err := OpenSQS(context.Background(), ok); err != nil {
		t.Errorf("open with the region in the host: %v", err)
	}
	for name, change := range map[string]func(*Target){
		"no queue":  func(t *Target) { t.URL = "https://sqs.eu-west-1.amazonaws.com/" },
		"not a URL": func(t *Target) { t.URL = "sqs.eu-west-1.amazonaws.com/1/q" },
		"no region": func(t *Target) { t.URL = "https://queue.example.com/1/q" },
		"no key id": func(t *Target) { t.Settings.AccessKeyID = "" },
		"no secret": func(t *Target) { t.Credentials.SecretAccessKey = "" },
		"no HTTP":   func(t *Target) { t.HTTP = nil },
	} {
		target := ok
		change(&target)
		if name == "no region" {
			target.Settings.Region = ""
		}
		if _, err := OpenSQS(context.Background(), target); err == nil {
			t.Errorf("%s: Open succeeded", name)
		} else if strings.Contains(err.Error(), brokertest.SQSSecret) {
			t.Errorf("%s: the error names the secret: %v", name, err)
		}
	}
	for in, want := range map[string]string{
		"customer-42":            "customer-42",
		"msg_1_7":                "msg_1_7",
		"with space":             "sha256-",
		"café":                   "sha256-",
		strings.Repeat("k", 129): "sha256-",
		"":                       "sha256-",
	} {
		if got := sqsGroupID(in); !strings.HasPrefix(got, want) || (want == "sha256-" && len(got) != len("sha256-")+64) {
			t.Errorf("group id of %q: %q, want %q", in, got, want)
		}
	}
}
