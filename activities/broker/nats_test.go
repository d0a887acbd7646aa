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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/wire"
)

const natsTestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/5pBqdvU1dc="

// natsTarget is a NATS destination on srv, dialed by a plain dialer that counts its dials.
func natsTarget(srv *brokertest.NATS, subject string, dials *atomic.Int64) broker.Target {
	return broker.Target{
		URL:      srv.URL(),
		Settings: destination.Settings{Type: destination.NATS, Subject: subject},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

func openNATS(t *testing.T, target broker.Target) broker.Publisher {
	t.Helper()
	p, err := broker.OpenNATS(t.Context(), target)
	if err != nil {
		t.Fatalf("OpenNATS: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// natsMessage is event n as the broker receiver kind builds it: the body, the delivery's headers
// under their wire names with the Standard Webhooks signature, and the webhook-id as DedupID.
func natsMessage(t *testing.T, n int) broker.Message {
	t.Helper()
	msgID := wire.MessageID(int64(1000+n), 7)
	body := fmt.Appendf(nil, `{"type":"order.created","timestamp":"2026-12-06T20:00:00Z","data":{"n":%d,"text":"ünïcode \u2028 \"quoted\""}}`, n)
	signedAt := time.Now()
	signature, err := wire.StandardSignature(msgID, signedAt, body, natsTestSecret)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{}
	for name, values := range wire.DeliveryHeader(msgID, "order.created", "webhookd/test", signedAt) {
		headers[strings.ToLower(name)] = values[0]
	}
	headers[wire.HeaderSignature] = signature
	headers[wire.HeaderSequence] = fmt.Sprint(n + 1)
	return broker.Message{Body: body, Headers: headers, DedupID: msgID}
}

// publish publishes m within timeout, on a context of its own: a publish a test left in flight
// is not cut when the test ends (a cut one could land in the next test's consumption).
func publish(t *testing.T, p broker.Publisher, m broker.Message, timeout time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Publish(ctx, m)
}

// TestNATSPublishes publishes 20 events at once and reads them back from the stream: each body
// byte for byte, every header under its name, the JetStream de-duplication id, and a signature
// the Standard Webhooks library verifies. The 20 share one connection, dialed by Target.Dial.
func TestNATSPublishes(t *testing.T) {
	srv := brokertest.StartNATS(t)
	var dials atomic.Int64
	p := openNATS(t, natsTarget(srv, srv.Subject(), &dials))

	sent := map[string]broker.Message{}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for n := range 20 {
		m := natsMessage(t, n)
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
	if n := dials.Load(); n != 1 {
		t.Errorf("the publisher dialed %d times through Target.Dial for 20 publishes, want once", n)
	}

	wh, err := standardwebhooks.NewWebhook(natsTestSecret)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Consume(t, 21, 3*time.Second)
	if len(got) != 20 {
		t.Fatalf("consumed %d messages, want 20", len(got))
	}
	for _, r := range got {
		m, ok := sent[r.Headers[wire.HeaderID]]
		if !ok {
			t.Errorf("consumed a message with webhook-id %q, not one sent", r.Headers[wire.HeaderID])
			continue
		}
		delete(sent, m.DedupID)
		if !bytes.Equal(r.Body, m.Body) {
			t.Errorf("%s: body %q, want %q", m.DedupID, r.Body, m.Body)
		}
		for name, value := range m.Headers {
			if r.Headers[name] != value {
				t.Errorf("%s: header %s is %q, want %q", m.DedupID, name, r.Headers[name], value)
			}
		}
		if r.Headers["Nats-Msg-Id"] != m.DedupID {
			t.Errorf("%s: Nats-Msg-Id is %q", m.DedupID, r.Headers["Nats-Msg-Id"])
		}
		header := http.Header{}
		for name, value := range r.Headers {
			header.Set(name, value)
		}
		if err := wh.Verify(r.Body, header); err != nil {
			t.Errorf("%s: Standard Webhooks verification: %v", m.DedupID, err)
		}
	}
}

// TestNATSBrokerKilled kills the server with SIGKILL: a Publish fails by its deadline with the
// network's error, which egress.Classify names (the refused connection once the publisher knows
// the old one is gone), not a broker's refusal. After the restart on the same port the same
// Publisher publishes again, and the stream kept what it acknowledged before the kill.
func TestNATSBrokerKilled(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p := openNATS(t, natsTarget(srv, srv.Subject(), nil))
	before := natsMessage(t, 1)
	if err := publish(t, p, before, 30*time.Second); err != nil {
		t.Fatalf("Publish before the kill: %v", err)
	}

	srv.Kill()
	var classes []string
	for i := range 2 {
		err := publishWithin(t, p, natsMessage(t, 2), 3*time.Second)
		if err == nil {
			t.Fatalf("Publish %d with the server killed succeeded", i+1)
		}
		if r := broker.AsRefusal(err); r != nil {
			t.Fatalf("Publish %d with the server killed: a refusal (%s: %s), want the network's error", i+1, r.Class, r.Message)
		}
		class, message := egress.Classify(err)
		t.Logf("Publish %d with the server killed: %s: %s (%v)", i+1, class, message, err)
		classes = append(classes, class)
	}
	// The first may meet the dead connection (EOF, reset, no answer); the second dials anew.
	if classes[1] != egress.ClassRefused {
		t.Errorf("the second Publish with the server down is classed %q, want %q", classes[1], egress.ClassRefused)
	}

	srv.Restart(t)
	after := natsMessage(t, 3)
	if err := publish(t, p, after, 30*time.Second); err != nil {
		t.Fatalf("Publish after the restart: %v", err)
	}
	got := srv.Consume(t, 3, 3*time.Second)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.Headers[wire.HeaderID])
	}
	if want := []string{before.DedupID, after.DedupID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("the stream holds %v, want %v", ids, want)
	}
}

// publishWithin publishes with a deadline and fails the test if Publish outlives it by far.
func publishWithin(t *testing.T, p broker.Publisher, m broker.Message, timeout time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- publish(t, p, m, timeout) }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout + 20*time.Second): // nats.go's own bound on a write is a minute
		t.Fatalf("Publish did not return long after its deadline of %s", timeout)
		return nil
	}
}

// TestNATSDeduplicates publishes one DedupID twice, as a retried attempt does: both publishes
// succeed and the stream stores the first alone.
func TestNATSDeduplicates(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p := openNATS(t, natsTarget(srv, srv.Subject(), nil))
	first := natsMessage(t, 1)
	again := first
	again.Body = []byte(`{"again":true}`)
	for _, m := range []broker.Message{first, again} {
		if err := publish(t, p, m, 30*time.Second); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	other := natsMessage(t, 2)
	if err := publish(t, p, other, 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := srv.Consume(t, 3, 3*time.Second)
	if len(got) != 2 || !bytes.Equal(got[0].Body, first.Body) || got[1].Headers[wire.HeaderID] != other.DedupID {
		var bodies []string
		for _, r := range got {
			bodies = append(bodies, string(r.Body))
		}
		t.Errorf("the stream holds %q, want the first message once, then the other", bodies)
	}
}

// TestNATSRefusals provokes each refusal the server makes: no stream for the subject, a wrong
// password, a user denied the subject, a full stream, a message over max_payload. None of the
// errors names the password.
func TestNATSRefusals(t *testing.T) {
	const password = "s3cret-Passw0rd-9f8e"
	const wrongPassword = "wr0ng-Passw0rd-1a2b"
	srv := brokertest.StartNATS(t, brokertest.WithNATSUsers(
		brokertest.NATSUser{Name: "publisher", Password: password},
		brokertest.NATSUser{Name: "reader", Password: password, DenyPublish: []string{brokertest.NATSSubject}},
	))
	srv.CreateStream(t, jetstream.StreamConfig{
		Name: "FULL", Subjects: []string{"full.one"}, Storage: jetstream.FileStorage,
		MaxMsgs: 1, Discard: jetstream.DiscardNew,
	})
	as := func(user, pass, subject string) broker.Target {
		target := natsTarget(srv, subject, nil)
		target.Credentials = destination.Credentials{Username: user, Password: pass}
		return target
	}
	big := natsMessage(t, 9)
	big.Body = bytes.Repeat([]byte("x"), brokertest.NATSMaxPayload+1)
	cases := []struct {
		name    string
		target  broker.Target
		before  []broker.Message // published first, successfully
		refused broker.Message
		class   string
		busy    bool
	}{
		{"no stream", as("publisher", password, "nostream.here"), nil, natsMessage(t, 2), broker.ClassBrokerMissing, false},
		{"wrong password", as("publisher", wrongPassword, brokertest.NATSSubject), nil, natsMessage(t, 2), broker.ClassBrokerAuth, false},
		{"no password", as("publisher", "", brokertest.NATSSubject), nil, natsMessage(t, 2), broker.ClassBrokerAuth, false},
		{"denied the subject", as("reader", password, brokertest.NATSSubject), nil, natsMessage(t, 2), broker.ClassBrokerAuth, false},
		{"full stream", as("publisher", password, "full.one"), []broker.Message{natsMessage(t, 1)}, natsMessage(t, 2), broker.ClassBrokerRefused, true},
		{"over max_payload", as("publisher", password, brokertest.NATSSubject), nil, big, broker.ClassBrokerRefused, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := openNATS(t, tc.target)
			for _, m := range tc.before {
				if err := publish(t, p, m, 30*time.Second); err != nil {
					t.Fatalf("Publish before the refused one: %v", err)
				}
			}
			// Twice: the second Publish meets the same answer on a connection opened again.
			for range 2 {
				err := publishWithin(t, p, tc.refused, 20*time.Second)
				r := broker.AsRefusal(err)
				if r == nil {
					t.Fatalf("Publish: %v, want a refusal of class %s", err, tc.class)
				}
				t.Logf("%s: %s", r.Class, r.Message)
				if r.Class != tc.class || r.Busy != tc.busy {
					t.Errorf("refusal class %s busy %v, want %s busy %v: %s", r.Class, r.Busy, tc.class, tc.busy, r.Message)
				}
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", r), r.Message, unwrapAll(err)} {
					if strings.Contains(text, password) || strings.Contains(text, wrongPassword) {
						t.Errorf("the error names the password: %s", text)
					}
				}
			}
		})
	}
	t.Run("right password", func(t *testing.T) {
		p := openNATS(t, as("publisher", password, brokertest.NATSSubject))
		if err := publish(t, p, natsMessage(t, 3), 30*time.Second); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	})
}

// unwrapAll is the text of every error in err's chain.
func unwrapAll(err error) string {
	var b strings.Builder
	for ; err != nil; err = errors.Unwrap(err) {
		b.WriteString(err.Error())
		b.WriteString("\n")
	}
	return b.String()
}

// TestNATSToken authenticates with a token: the right one publishes, a wrong one is an auth
// refusal that names neither token.
func TestNATSToken(t *testing.T) {
	const token = "t0ken-Abcdef-123456"
	const wrong = "wr0ng-t0ken-654321"
	srv := brokertest.StartNATS(t, brokertest.WithNATSToken(token))
	target := natsTarget(srv, brokertest.NATSSubject, nil)
	target.Credentials = destination.Credentials{Token: token}
	if err := publish(t, openNATS(t, target), natsMessage(t, 1), 30*time.Second); err != nil {
		t.Fatalf("Publish with the token: %v", err)
	}
	target.Credentials.Token = wrong
	err := publish(t, openNATS(t, target), natsMessage(t, 2), 20*time.Second)
	r := broker.AsRefusal(err)
	if r == nil || r.Class != broker.ClassBrokerAuth {
		t.Fatalf("Publish with a wrong token: %v, want a refusal of class %s", err, broker.ClassBrokerAuth)
	}
	if text := unwrapAll(err) + fmt.Sprintf("%+v %#v", err, r); strings.Contains(text, token) || strings.Contains(text, wrong) {
		t.Errorf("the error names a token: %s", text)
	}
}

// TestNATSDialsThroughTarget: Target.Dial is the publisher's only way out. A Dial that the address
// policy refuses fails the Publish with the policy's class, and Open connects nowhere: it succeeds
// with no server listening, and the Publish names the refused connection.
func TestNATSDialsThroughTarget(t *testing.T) {
	blocked := broker.Target{
		URL:      "nats://203.0.113.7:4222",
		Settings: destination.Settings{Type: destination.NATS, Subject: "s"},
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: egress.ErrBlockedAddress}
		},
	}
	p := openNATS(t, blocked)
	err := publish(t, p, natsMessage(t, 1), 10*time.Second)
	if class, _ := egress.Classify(err); class != egress.ClassBlocked {
		t.Errorf("Publish through a Dial that refuses the address: %v, classed %q, want %q", err, class, egress.ClassBlocked)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	down := broker.Target{
		URL:      "nats://" + addr,
		Settings: destination.Settings{Type: destination.NATS, Subject: "s"},
		Dial:     (&net.Dialer{}).DialContext,
	}
	p = openNATS(t, down)
	err = publish(t, p, natsMessage(t, 1), 10*time.Second)
	if class, _ := egress.Classify(err); class != egress.ClassRefused || broker.AsRefusal(err) != nil {
		t.Errorf("Publish with no server listening: %v, classed %q, want %q", err, class, egress.ClassRefused)
	}
}

// TestNATSClose: Close is idempotent, and a closed Publisher publishes no more.
func TestNATSClose(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p, err := broker.OpenNATS(t.Context(), natsTarget(srv, srv.Subject(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(t, p, natsMessage(t, 1), 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for range 2 {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if err := publish(t, p, natsMessage(t, 2), 10*time.Second); err == nil {
		t.Error("Publish after Close succeeded")
	}
}

// TestOpenNATSRefusesBadSettings: Open checks what it is given, and its errors name the field,
// never the password.
func TestOpenNATSRefusesBadSettings(t *testing.T) {
	dial := (&net.Dialer{}).DialContext
	settings := destination.Settings{Type: destination.NATS, Subject: "s"}
	cases := []struct {
		name   string
		target broker.Target
		want   string
	}{
		{"scheme", broker.Target{URL: "http://h:4222", Settings: settings, Dial: dial}, "scheme"},
		{"password in URL", broker.Target{URL: "nats://u:hunter2-pw@h:4222", Settings: settings, Dial: dial}, "password"},
		{"no subject", broker.Target{URL: "nats://h:4222", Settings: destination.Settings{Type: destination.NATS}, Dial: dial}, "subject"},
		{"no host", broker.Target{URL: "nats://:4222", Settings: settings, Dial: dial}, "host"},
		{"no dial", broker.Target{URL: "nats://h:4222", Settings: settings}, "Dial"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := broker.OpenNATS(t.Context(), tc.target)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("OpenNATS: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestNATSTLS publishes over tls:// with the server's certificate checked against the roots of
// Target.HTTP's transport (the egress client's). Without those roots the handshake fails with
// egress.ClassTLS; a nats:// URL to the TLS-only server is the broker's refusal.
func TestNATSTLS(t *testing.T) {
	ca := egresstest.NewCA(t, "nats CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	leaf := ca.Server(t)
	srv := brokertest.StartNATS(t, brokertest.WithNATSTLS(leaf.CertPEM, leaf.KeyPEM, ca.Pool()))
	if !strings.HasPrefix(srv.URL(), "tls://") {
		t.Fatalf("URL %s", srv.URL())
	}
	target := natsTarget(srv, srv.Subject(), nil)
	target.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	p := openNATS(t, target)
	m := natsMessage(t, 1)
	if err := publish(t, p, m, 30*time.Second); err != nil {
		t.Fatalf("Publish over TLS: %v", err)
	}
	if got := srv.Consume(t, 1, 10*time.Second); len(got) != 1 || !bytes.Equal(got[0].Body, m.Body) {
		t.Errorf("consumed %d messages, want the one published", len(got))
	}

	untrusted := natsTarget(srv, srv.Subject(), nil)
	err := publish(t, openNATS(t, untrusted), m, 10*time.Second)
	if class, _ := egress.Classify(err); class != egress.ClassTLS || broker.AsRefusal(err) != nil {
		t.Errorf("Publish to a certificate of an unknown CA: %v, classed %q, want %q", err, class, egress.ClassTLS)
	}

	plain := natsTarget(srv, srv.Subject(), nil)
	plain.URL = "nats://" + srv.Addr()
	err = publish(t, openNATS(t, plain), m, 10*time.Second)
	if r := broker.AsRefusal(err); r == nil || r.Class != broker.ClassBrokerRefused || !strings.Contains(r.Message, "tls://") {
		t.Errorf("Publish over nats:// to a TLS-only server: %v, want a refusal naming tls://", err)
	}
}

// TestNATSBrokerHangs stops the server with SIGSTOP: it keeps the connection and answers nothing.
// Publish fails at its deadline with egress.ClassTimeout, not a refusal, and so does the next one,
// which finds the server accepting connections but never greeting. Once the server continues, the
// same Publisher publishes again. A message larger than the socket's buffers, which nats.go
// writes under its lock until the server reads, still ends its Publish at the deadline.
func TestNATSBrokerHangs(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p := openNATS(t, natsTarget(srv, srv.Subject(), nil))
	m1, m2, large, m4 := natsMessage(t, 1), natsMessage(t, 2), natsMessage(t, 3), natsMessage(t, 4)
	large.Body = bytes.Repeat([]byte("y"), brokertest.NATSMaxPayload-1024)
	if err := publish(t, p, m1, 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	srv.Pause(t)
	for i := range 2 {
		err := publishWithin(t, p, m2, 2*time.Second)
		class, message := egress.Classify(err)
		t.Logf("Publish %d to the stopped server: %s: %s", i+1, class, message)
		if class != egress.ClassTimeout || broker.AsRefusal(err) != nil {
			t.Errorf("Publish %d to the stopped server: %v, classed %q, want %q", i+1, err, class, egress.ClassTimeout)
		}
	}
	srv.Resume(t)
	if err := publish(t, p, m2, 30*time.Second); err != nil {
		t.Fatalf("Publish after the server continued: %v", err)
	}

	srv.Pause(t)
	err := publishWithin(t, p, large, 2*time.Second)
	if class, _ := egress.Classify(err); class != egress.ClassTimeout || broker.AsRefusal(err) != nil {
		t.Errorf("Publish of %d bytes to the stopped server: %v, classed %q, want %q", len(large.Body), err, class, egress.ClassTimeout)
	}
	srv.Resume(t)
	if err := publish(t, p, m4, 30*time.Second); err != nil {
		t.Fatalf("Publish after the server continued: %v", err)
	}

	count := map[string]int{}
	for _, r := range srv.Consume(t, 5, 3*time.Second) {
		count[r.Headers[wire.HeaderID]]++
	}
	if count[m1.DedupID] != 1 || count[m2.DedupID] != 1 || count[m4.DedupID] != 1 || count[large.DedupID] > 1 {
		t.Errorf("the stream holds %v: want each message once (the large one at most once)", count)
	}
}

// TestNATSReservedHeaders: a message's headers cannot steer JetStream. Headers named Nats-* (its
// own: the de-duplication id, expectations, rollups, TTLs) are not sent, so a webhook's custom
// header cannot replace DedupID, fail the publish on an expectation, or purge the stream.
func TestNATSReservedHeaders(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p := openNATS(t, natsTarget(srv, srv.Subject(), nil))
	first := natsMessage(t, 1)
	if err := publish(t, p, first, 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	m := natsMessage(t, 2)
	m.Headers["Nats-Msg-Id"] = first.DedupID // would make m a duplicate of first
	m.Headers["nats-expected-stream"] = "ANOTHER"
	m.Headers["Nats-Rollup"] = "all" // would purge first
	if err := publish(t, p, m, 30*time.Second); err != nil {
		t.Fatalf("Publish with Nats-* headers: %v", err)
	}
	got := srv.Consume(t, 3, 3*time.Second)
	if len(got) != 2 || got[1].Headers["Nats-Msg-Id"] != m.DedupID {
		t.Fatalf("the stream holds %d messages (want 2), the second's Nats-Msg-Id %q (want %q)", len(got), got[len(got)-1].Headers["Nats-Msg-Id"], m.DedupID)
	}
	for name := range got[1].Headers {
		if strings.EqualFold(name, "Nats-Rollup") || strings.EqualFold(name, "Nats-Expected-Stream") {
			t.Errorf("header %s reached the stream", name)
		}
	}
}

// TestNATSCancelKeepsConnection: a Publish whose context is cancelled (its activity is) returns,
// and leaves the connection to the Publishes sharing it: one waiting on the stopped server is
// acknowledged once the server continues.
func TestNATSCancelKeepsConnection(t *testing.T) {
	srv := brokertest.StartNATS(t)
	p := openNATS(t, natsTarget(srv, srv.Subject(), nil))
	if err := publish(t, p, natsMessage(t, 1), 30*time.Second); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	srv.Pause(t)
	waiting := make(chan error, 1)
	go func() { waiting <- publish(t, p, natsMessage(t, 2), 60*time.Second) }()
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := make(chan error, 1)
	go func() { cancelled <- p.Publish(ctx, natsMessage(t, 3)) }()
	time.Sleep(200 * time.Millisecond) // let both reach the server's socket; no outcome depends on it
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled Publish: %v, want context.Canceled", err)
	}
	srv.Resume(t)
	if err := <-waiting; err != nil {
		t.Errorf("the Publish sharing the connection: %v", err)
	}
}

// TestNATSClientCertificate: a server that requires a client certificate takes the one of
// Target.HTTP's TLS (a webhook's own client certificate, issue 41); without it the connection
// fails with egress.ClassTLS.
func TestNATSClientCertificate(t *testing.T) {
	ca := egresstest.NewCA(t, "nats CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	clients := egresstest.NewCA(t, "clients CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	leaf := ca.Server(t)
	helper := clients.Client(t, "brokertest", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	srv := brokertest.StartNATS(t, brokertest.WithNATSTLS(leaf.CertPEM, leaf.KeyPEM, ca.Pool()),
		brokertest.WithNATSClientCA(clients.CertPEM, helper.TLS))
	client := clients.Client(t, "webhookd", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))

	with := natsTarget(srv, srv.Subject(), nil)
	with.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}, NextProtos: []string{"h2", "http/1.1"},
	}}}
	if err := publish(t, openNATS(t, with), natsMessage(t, 1), 30*time.Second); err != nil {
		t.Fatalf("Publish with the client certificate: %v", err)
	}

	without := natsTarget(srv, srv.Subject(), nil)
	without.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	err := publish(t, openNATS(t, without), natsMessage(t, 2), 10*time.Second)
	if class, message := egress.Classify(err); class != egress.ClassTLS || broker.AsRefusal(err) != nil {
		t.Errorf("Publish without a client certificate: %v, classed %q (%s), want %q", err, class, message, egress.ClassTLS)
	}
}
