package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestWebhookTLS (issue 31, part 3): TLS settings set at create are stored sealed and shown by
// every read as their certificates' subject, issuer and expiry, the private key redacted; a PUT
// that leaves them out keeps them, null clears them, an object replaces them, as PATCH does; a
// PEM that does not parse, a key that does not match, a certificate expired or not yet valid and
// a certificate without its key are refused naming the field, and nothing is stored.
func TestWebhookTLS(t *testing.T) {
	now := time.Now()
	ca := egresstest.NewCA(t, "Receiver CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	clientCA := egresstest.NewCA(t, "Client CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	client := clientCA.Client(t, "webhookd client", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	other := clientCA.Client(t, "other client", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	expired := clientCA.Client(t, "expired client", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	future := clientCA.Client(t, "future client", now.Add(24*time.Hour), now.Add(48*time.Hour))
	oldCA := egresstest.NewCA(t, "Old CA", now.Add(-48*time.Hour), now.Add(-time.Hour))
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	mtls := `{"caCert":` + q(ca.CertPEM) + `,"clientCert":` + q(client.CertPEM) + `,"clientKey":` + q(client.KeyPEM) + `}`
	caOnly := `{"caCert":` + q(ca.CertPEM) + `}`
	body := egresstest.KeyBody(client.KeyPEM)
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := v.auth(newKey(t, e.db))
		shows := func(what string, r response, caCN, clientCN string) {
			t.Helper()
			r.expect(t, r.status, "")
			if strings.Contains(string(r.raw), "PRIVATE KEY") || strings.Contains(string(r.raw), body) || strings.Contains(string(r.raw), "BEGIN CERTIFICATE") {
				t.Fatalf("%s shows a PEM: %s", what, r.raw)
			}
			got, _ := r.data(t)["tls"].(map[string]any)
			if got == nil {
				t.Fatalf("%s: tls = %v", what, r.data(t)["tls"])
			}
			check := func(field, cn string) {
				c, _ := got[field].(map[string]any)
				if cn == "" {
					if got[field] != nil {
						t.Fatalf("%s: tls.%s = %v, want null", what, field, got[field])
					}
					return
				}
				if c == nil || !strings.Contains(fmt.Sprint(c["subject"]), "CN="+cn) || c["issuer"] == nil || c["notAfter"] == nil {
					t.Fatalf("%s: tls.%s = %v, want subject CN=%s, issuer and notAfter", what, field, got[field], cn)
				}
			}
			check("caCert", caCN)
			check("clientCert", clientCN)
			if wantKey := clientCN != ""; wantKey != (got["clientKey"] == "••••••••") {
				t.Fatalf("%s: tls.clientKey = %v", what, got["clientKey"])
			}
		}
		created := e.do(t, "POST", v.collection, key, limitsBody("https://h.example.com/", v.eventType, `"tls":`+mtls))
		created.expect(t, http.StatusCreated, "")
		shows("create", created, "Receiver CA", "webhookd client")
		id := created.data(t)["id"]
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(id))
		stored := loadWebhook(t, e, id)
		if stored.TLS == nil || strings.Contains(*stored.TLS, "PRIVATE") || strings.Contains(*stored.TLS, body) || stored.TLSExpiresAt == nil {
			t.Fatalf("stored tls = %v, want ciphertext and an expiry", stored.TLS)
		}
		if d := stored.TLSExpiresAt.Sub(now.Add(30 * 24 * time.Hour)); d > time.Minute || d < -time.Minute {
			t.Fatalf("tls_expires_at = %v, want the client certificate's notAfter", stored.TLSExpiresAt)
		}
		shows("GET", e.do(t, "GET", one, key, ""), "Receiver CA", "webhookd client")
		list := e.do(t, "GET", v.collection, key, "")
		list.expect(t, http.StatusOK, "")
		if strings.Contains(string(list.raw), body) || !strings.Contains(string(list.raw), "CN=webhookd client") {
			t.Fatalf("list: %s", list.raw)
		}
		plain := e.do(t, "POST", v.collection, key, createBody("https://p.example.com/", v.eventType))
		plain.expect(t, http.StatusCreated, "")
		if a, ok := plain.data(t)["tls"]; !ok || a != nil {
			t.Fatalf("a webhook without tls shows tls %v (present %v), want null", a, ok)
		}

		// PUT without tls keeps it; an object replaces it; null clears it.
		shows("PUT without tls", e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/"}`), "Receiver CA", "webhookd client")
		shows("PUT with caCert only", e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/","tls":`+caOnly+`}`), "Receiver CA", "")
		cleared := e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/","tls":null}`)
		cleared.expect(t, http.StatusOK, "")
		if w := loadWebhook(t, e, id); cleared.data(t)["tls"] != nil || w.TLS != nil || w.TLSExpiresAt != nil {
			t.Fatalf("PUT tls null: tls %v", cleared.data(t)["tls"])
		}
		// PATCH: an object sets it, leaving it out keeps it, null removes it.
		shows("PATCH", e.do(t, "PATCH", one, key, `{"tls":`+mtls+`}`), "Receiver CA", "webhookd client")
		shows("PATCH without tls", e.do(t, "PATCH", one, key, `{"rateLimit":5}`), "Receiver CA", "webhookd client")
		if got := e.do(t, "PATCH", one, key, `{"tls":null}`).data(t)["tls"]; got != nil {
			t.Fatalf("PATCH tls null: tls %v", got)
		}
		shows("PATCH before the refusals", e.do(t, "PATCH", one, key, `{"tls":`+mtls+`}`), "Receiver CA", "webhookd client")
		sealed := *loadWebhook(t, e, id).TLS

		pair := func(cert, key string) string { return `{"clientCert":` + q(cert) + `,"clientKey":` + q(key) + `}` }
		for _, c := range []struct {
			name, tls, field string
			status           int
		}{
			{"garbage caCert", `{"caCert":"not a certificate"}`, "tls.caCert", http.StatusUnprocessableEntity},
			{"a key as caCert", `{"caCert":` + q(client.KeyPEM) + `}`, "tls.caCert", http.StatusUnprocessableEntity},
			{"expired caCert", `{"caCert":` + q(oldCA.CertPEM) + `}`, "tls.caCert", http.StatusUnprocessableEntity},
			{"garbage clientCert", pair("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", client.KeyPEM), "tls.clientCert", http.StatusUnprocessableEntity},
			{"garbage clientKey", pair(client.CertPEM, "garbage"), "tls.clientKey", http.StatusUnprocessableEntity},
			{"key not matching", pair(client.CertPEM, other.KeyPEM), "tls.clientKey", http.StatusUnprocessableEntity},
			{"expired clientCert", pair(expired.CertPEM, expired.KeyPEM), "tls.clientCert", http.StatusUnprocessableEntity},
			{"not yet valid clientCert", pair(future.CertPEM, future.KeyPEM), "tls.clientCert", http.StatusUnprocessableEntity},
			{"clientCert without clientKey", `{"clientCert":` + q(client.CertPEM) + `}`, "tls.clientKey", http.StatusUnprocessableEntity},
			{"clientKey without clientCert", `{"clientKey":` + q(client.KeyPEM) + `}`, "tls.clientCert", http.StatusUnprocessableEntity},
			{"empty object", `{}`, "tls", http.StatusBadRequest},
			{"unknown field", `{"caCert":` + q(ca.CertPEM) + `,"verify":false}`, "tls", http.StatusBadRequest},
			{"not an object", `"pem"`, "tls", http.StatusBadRequest},
		} {
			t.Run(c.name, func(t *testing.T) {
				refused := func(r response) {
					t.Helper()
					r.expectError(t, v, c.status, c.field)
					if strings.Contains(string(r.raw), body) {
						t.Fatalf("a refusal quotes the key: %s", r.raw)
					}
				}
				refused(e.do(t, "PATCH", one, key, `{"tls":`+c.tls+`}`))
				refused(e.do(t, "PUT", one, key, `{"url":"https://h3.example.com/","tls":`+c.tls+`}`))
				before := len(e.do(t, "GET", v.collection, key, "").body["data"].([]any))
				refused(e.do(t, "POST", v.collection, key, limitsBody("https://h4.example.com/", v.eventType, `"tls":`+c.tls)))
				if after := len(e.do(t, "GET", v.collection, key, "").body["data"].([]any)); after != before {
					t.Fatalf("a refused create stored a webhook: %d webhooks, were %d", after, before)
				}
				if w := loadWebhook(t, e, id); w.TLS == nil || *w.TLS != sealed || w.URL != "https://h2.example.com/" {
					t.Fatalf("a refused change changed the webhook: %+v", w)
				}
			})
		}
	})
}

// TestCertificatesExpiringGauge: webhookd_webhook_certificates_expiring counts the webhooks whose
// TLS settings hold a certificate that expires within 14 days, client or CA, at scrape time.
func TestCertificatesExpiringGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Registry, c.Gatherer = reg, reg })
	now := time.Now()
	ca := egresstest.NewCA(t, "CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	soonCA := egresstest.NewCA(t, "Soon CA", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	soon := ca.Client(t, "soon", now.Add(-time.Hour), now.Add(13*24*time.Hour))
	later := ca.Client(t, "later", now.Add(-time.Hour), now.Add(15*24*time.Hour))
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	v := variants[1]
	key := v.auth(newKey(t, e.db))
	gauge := func(want string) {
		t.Helper()
		m := e.do(t, "GET", "/metrics", nil, "")
		if line := "webhookd_webhook_certificates_expiring " + want; !strings.Contains(string(m.raw), line+"\n") {
			t.Fatalf("metrics lack %q", line)
		}
	}
	gauge("0")
	for i, tls := range []string{
		`{"clientCert":` + q(soon.CertPEM) + `,"clientKey":` + q(soon.KeyPEM) + `}`,
		`{"clientCert":` + q(later.CertPEM) + `,"clientKey":` + q(later.KeyPEM) + `}`,
		`{"caCert":` + q(soonCA.CertPEM) + `}`,
		`{"caCert":` + q(ca.CertPEM) + `}`,
	} {
		e.do(t, "POST", v.collection, key, limitsBody(fmt.Sprintf("https://h%d.example.com/", i), v.eventType, `"tls":`+tls)).
			expect(t, http.StatusCreated, "")
	}
	gauge("2")
}
