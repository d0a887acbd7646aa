package egress

import (
	"context"
	"crypto/tls"
	"errors"
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
	// The breakers: a webhook's own settings failing is that endpoint's failure, not its host's,
	// which other webhooks share; the same failure through the shared transport is the host's.
	if o := judge(context.Background(), nil, ownTLSFailure{err}); o != endpointFailed {
		t.Fatalf("a failure of the webhook's own TLS settings judged %v, want endpointFailed", o)
	}
	if o := judge(context.Background(), nil, err); o != hostFailed {
		t.Fatalf("a TLS failure through the shared transport judged %v, want hostFailed", o)
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
