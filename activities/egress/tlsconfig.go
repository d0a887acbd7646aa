package egress

import (
	"container/list"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// maxTLSTransports bounds how many transports built for webhooks' own TLS settings a Client keeps:
// the least recently used is dropped (its idle connections closed) and built again when needed.
const maxTLSTransports = 256

// ReceiverTLS is one webhook's own TLS settings toward its receiver, as PEM text: CACert is
// trusted beside the client's roots (the system pool and WEBHOOKD_EXTRA_CA_FILE), not instead, so
// a receiver that moves to a public certificate keeps working; ClientCert and ClientKey, both or
// neither, are presented when the receiver asks for a client certificate.
type ReceiverTLS struct {
	CACert, ClientCert, ClientKey string
}

// tlsClients holds the HTTP clients built for webhooks' own TLS settings, by webhook id and a hash
// of the settings, least recently used first out. Each is a clone of the shared transport (the
// same dialer: address checks at dial time, the proxy, keep-alive) with its own TLS config, and
// follows no redirect. A webhook without TLS settings never comes here.
type tlsClients struct {
	base  *http.Transport
	roots *x509.CertPool

	mu    sync.Mutex
	order *list.List // of *tlsClient, most recently used first
	byKey map[string]*list.Element
}

type tlsClient struct {
	key  string
	http *http.Client
}

func newTLSClients(base *http.Transport, roots *x509.CertPool) *tlsClients {
	return &tlsClients{base: base, roots: roots, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns the client for webhook's settings t, building it on first use. The key holds a hash
// of the settings, never the key material, so a changed setting gets a new client and the old one
// ages out.
func (cs *tlsClients) get(webhook int64, t *ReceiverTLS) (*http.Client, error) {
	sum := sha256.Sum256([]byte(t.CACert + "\x00" + t.ClientCert + "\x00" + t.ClientKey))
	key := fmt.Sprintf("%d/%x", webhook, sum)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e, ok := cs.byKey[key]; ok {
		cs.order.MoveToFront(e)
		return e.Value.(*tlsClient).http, nil
	}
	cfg, err := cs.config(t)
	if err != nil {
		return nil, err
	}
	transport := cs.base.Clone()
	transport.TLSClientConfig = cfg
	c := &tlsClient{key: key, http: &http.Client{Transport: transport, CheckRedirect: noRedirects}}
	cs.byKey[key] = cs.order.PushFront(c)
	for cs.order.Len() > maxTLSTransports {
		oldest := cs.order.Back()
		cs.order.Remove(oldest)
		old := oldest.Value.(*tlsClient)
		delete(cs.byKey, old.key)
		old.http.CloseIdleConnections()
	}
	return c.http, nil
}

// config is the shared transport's TLS config with t's CA bundle added to the roots and its client
// certificate. Its errors never quote the PEM.
func (cs *tlsClients) config(t *ReceiverTLS) (*tls.Config, error) {
	cfg := cs.base.TLSClientConfig.Clone()
	if t.CACert != "" {
		roots := cs.roots.Clone()
		if !roots.AppendCertsFromPEM([]byte(t.CACert)) {
			return nil, errors.New("egress: the webhook's tls.caCert holds no PEM certificate")
		}
		cfg.RootCAs = roots
	}
	if t.ClientCert != "" || t.ClientKey != "" {
		pair, err := tls.X509KeyPair([]byte(t.ClientCert), []byte(t.ClientKey))
		if err != nil {
			return nil, errors.New("egress: the webhook's tls.clientCert and tls.clientKey are not a certificate and its key")
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// len is how many clients are kept.
func (cs *tlsClients) len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.order.Len()
}

// noRedirects makes a client hand back a redirect as the reply.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
