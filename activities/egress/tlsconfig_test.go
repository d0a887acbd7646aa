package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
)

// mtlsServer is a receiver whose certificate a private CA signed and that requires a client
// certificate signed by clientCA; it counts the requests that reached its handler.
func mtlsServer(t *testing.T, serverCA, clientCA *egresstest.CA) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			t.Errorf("a request without a client certificate reached the handler")
		}
		served.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{serverCA.Server(t).TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCA.Pool(),
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &served
}

// TestReceiverTLS: a receiver with a private CA that requires a client certificate from another
// private CA is reached only with the webhook's TLS settings: without them the handshake fails
// (unknown authority), with the CA alone it fails for lack of a client certificate, with the CA
// and the client certificate the delivery arrives. The webhook's CA is trusted beside the
// client's roots, not instead. A webhook without TLS settings goes through the shared transport.
func TestReceiverTLS(t *testing.T) {
	now := time.Now()
	serverCA := egresstest.NewCA(t, "Receiver CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	clientCA := egresstest.NewCA(t, "Client CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	client := clientCA.Client(t, "webhookd", now.Add(-time.Hour), now.Add(24*time.Hour))
	srv, served := mtlsServer(t, serverCA, clientCA)

	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}})
	post := func(webhook int64, rt *ReceiverTLS) (*Turn, *Response, error) {
		t.Helper()
		turn, err := c.Take(context.Background(), Request{URL: srv.URL, Endpoint: Endpoint{Webhook: webhook}, TLS: rt})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := turn.Post(context.Background(), testHeader, []byte(`{}`))
		return turn, resp, err
	}

	turn, _, err := post(1, nil)
	if class, msg := Classify(err); class != ClassTLS {
		t.Fatalf("without tls: %v (class %q, %q), want class %q", err, class, msg, ClassTLS)
	}
	if turn.http != c.http || c.tls.len() != 0 {
		t.Fatalf("a webhook without tls did not use the shared client (%d tls clients)", c.tls.len())
	}

	// TLS 1.3: the receiver's certificate_required alert (RFC 8446 6.2).
	_, _, err = post(1, &ReceiverTLS{CACert: serverCA.CertPEM})
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("with caCert only: %v, want a handshake failure for lack of a client certificate", err)
	}
	if class, msg := Classify(err); class != ClassTLS {
		t.Fatalf("with caCert only: class %q (%q), want %q", class, msg, ClassTLS)
	}
	// The breakers: a handshake's outcome depends on what the webhook presents and trusts, so its
	// failure is that endpoint's, never its host's, which other webhooks share
	// (TestTLSFailuresNeverOpenTheHost).
	if o := judge(context.Background(), nil, err); o != endpointFailed {
		t.Fatalf("a TLS failure judged %v, want endpointFailed", o)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the receiver served %d requests without a client certificate", n)
	}

	full := &ReceiverTLS{CACert: serverCA.CertPEM, ClientCert: client.CertPEM, ClientKey: client.KeyPEM}
	first, resp, err := post(1, full)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("with caCert and a client certificate: %v, %+v", err, resp)
	}
	again, resp, err := post(1, &ReceiverTLS{CACert: full.CACert, ClientCert: full.ClientCert, ClientKey: full.ClientKey})
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("again: %v, %+v", err, resp)
	}
	if first.http != again.http || first.http == c.http {
		t.Fatal("the same settings built another client, or used the shared one")
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("the receiver served %d requests, want 2", n)
	}
	// Webhook 1 with caCert only, and webhook 1 with both: two clients, none for the failures.
	if n := c.tls.len(); n != 2 {
		t.Fatalf("%d tls clients, want 2", n)
	}
	plain, _, _ := post(2, nil)
	if plain.http != c.http {
		t.Fatal("a webhook without tls left the shared client once others had their own")
	}

	// Beside, not instead: a client whose roots trust the receiver's CA (as WEBHOOKD_EXTRA_CA_FILE
	// would) still reaches it when the webhook's caCert is another CA.
	beside := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, RootCAs: serverCA.Pool()})
	otherCA := egresstest.NewCA(t, "Other CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	resp, err = beside.Do(context.Background(), Request{URL: srv.URL, Endpoint: Endpoint{Webhook: 3},
		TLS: &ReceiverTLS{CACert: otherCA.CertPEM, ClientCert: client.CertPEM, ClientKey: client.KeyPEM}}, testHeader, nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a webhook CA beside the client's roots: %v, %+v", err, resp)
	}
}

// TestReceiverTLSBounded: at most maxTLSTransports clients are kept, the least recently used
// dropped first.
func TestReceiverTLSBounded(t *testing.T) {
	now := time.Now()
	ca := egresstest.NewCA(t, "CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	c := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}})
	rt := &ReceiverTLS{CACert: ca.CertPEM}
	first, err := c.tls.get(0, rt)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= maxTLSTransports; id++ {
		if _, err := c.tls.get(id, rt); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.tls.len(); n != maxTLSTransports {
		t.Fatalf("%d tls clients, want %d", n, maxTLSTransports)
	}
	if again, _ := c.tls.get(0, rt); again == first {
		t.Fatal("the least recently used client was kept past the bound")
	}
	if _, err := c.tls.get(9999, &ReceiverTLS{CACert: "junk"}); err == nil {
		t.Fatal("a caCert without a certificate built a client")
	}
}

// TestReceiverTLSSameDialer: a webhook's own transport dials as the shared one does: through the
// egress proxy, asked for the checked IP, and under the address policy, which refuses a blocked
// address before anything reaches the receiver.
func TestReceiverTLSSameDialer(t *testing.T) {
	now := time.Now()
	serverCA := egresstest.NewCA(t, "Receiver CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	clientCA := egresstest.NewCA(t, "Client CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	client := clientCA.Client(t, "webhookd", now.Add(-time.Hour), now.Add(24*time.Hour))
	srv, served := mtlsServer(t, serverCA, clientCA)
	rt := &ReceiverTLS{CACert: serverCA.CertPEM, ClientCert: client.CertPEM, ClientKey: client.KeyPEM}

	proxy := newConnectProxy(t, "webhookd", "hunter2")
	viaProxy := newClient(t, Options{Policy: AddressPolicy{AllowPrivate: true}, Proxy: proxy.url(url.UserPassword("webhookd", "hunter2"))})
	resp, err := viaProxy.Do(context.Background(), Request{URL: srv.URL, Endpoint: Endpoint{Webhook: 1}, TLS: rt}, testHeader, nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("through the proxy: %v, %+v", err, resp)
	}
	if _, targets := proxy.seen(); len(targets) != 1 || targets[0] != "127.0.0.1:"+port(t, srv.URL) {
		t.Fatalf("CONNECT targets %q, want one to the receiver's checked IP", targets)
	}

	policed := newClient(t, Options{}) // the production policy
	_, err = policed.Do(context.Background(), Request{URL: srv.URL, Endpoint: Endpoint{Webhook: 1}, TLS: rt}, testHeader, nil)
	if !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("a loopback receiver with tls: %v, want ErrBlockedAddress", err)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("the receiver served %d requests, want 1 (the proxied one)", n)
	}
}

// TestTLSFailuresNeverOpenTheHost is issue 40's second path: account 1's webhook reaches a host
// that requires a client certificate with its own TLS settings; account 2 registers webhooks on the
// same host without one and fails the handshake again and again, through the shared transport
// (certificate_required where the shared roots trust the host, unknown authority where they do
// not). Those failures depend on what each webhook presents and trusts, so they open account 2's
// endpoints' breakers and never the host's: account 1's deliveries go on arriving.
func TestTLSFailuresNeverOpenTheHost(t *testing.T) {
	now := time.Now()
	serverCA := egresstest.NewCA(t, "Receiver CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	clientCA := egresstest.NewCA(t, "Client CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	client := clientCA.Client(t, "webhookd", now.Add(-time.Hour), now.Add(24*time.Hour))
	own := &ReceiverTLS{CACert: serverCA.CertPEM, ClientCert: client.CertPEM, ClientKey: client.KeyPEM}
	for _, tc := range []struct {
		name  string
		trust bool   // the shared roots trust the host's CA, as they would a public one
		want  string // what the certificate-less handshake fails with
	}{
		{name: "certificate required", trust: true, want: "certificate required"},
		{name: "unknown authority", trust: false, want: "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, served := mtlsServer(t, serverCA, clientCA)
			o := Options{Policy: AddressPolicy{AllowPrivate: true}, BreakerFailures: 2, BreakerCooldown: time.Hour}
			if tc.trust {
				o.RootCAs = serverCA.Pool()
			}
			c := newClient(t, o)
			post := func(ep Endpoint, rt *ReceiverTLS) (*Response, error) {
				return c.Do(context.Background(), Request{URL: srv.URL + fmt.Sprintf("/%d", ep.Webhook), Endpoint: ep, TLS: rt}, testHeader, []byte(`{}`))
			}
			if resp, err := post(Endpoint{Account: 1, Webhook: 1}, own); err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("account 1 before: %v, %+v", err, resp)
			}
			// Account 2: three webhooks, each failing until its own breaker opens.
			for webhook := int64(2); webhook <= 4; webhook++ {
				for range 3 {
					_, err := post(Endpoint{Account: 2, Webhook: webhook}, nil)
					if err == nil {
						t.Fatalf("account 2's webhook %d reached the receiver without a certificate", webhook)
					}
					if !errors.Is(err, ErrCircuitOpen) && !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("account 2's webhook %d: %v, want %q", webhook, err, tc.want)
					}
				}
				var circuit *CircuitOpenError
				if _, err := post(Endpoint{Account: 2, Webhook: webhook}, nil); !errors.As(err, &circuit) || circuit.Scope != scopeEndpoint {
					t.Fatalf("account 2's webhook %d after its failures: %v, want its endpoint's breaker open", webhook, err)
				}
			}
			for i := range 5 {
				if resp, err := post(Endpoint{Account: 1, Webhook: 1}, own); err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("account 1's delivery %d after account 2's TLS failures: %v, %+v", i, err, resp)
				}
			}
			if n := served.Load(); n != 6 {
				t.Fatalf("the receiver served %d requests, want account 1's 6", n)
			}
		})
	}
}
