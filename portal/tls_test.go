package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/model"
)

// TestTLSForm (issue 31, part 3): the endpoint page's TLS form sets a CA and a client certificate
// from pasted PEMs, shows their subjects and expiry and never the key, warns of a certificate that
// expires within 14 days, refuses a key that does not match naming the field (nothing saved,
// markup escaped), and removes them. Without the CSRF token, or in a read-only session, nothing
// changes.
func TestTLSForm(t *testing.T) {
	now := time.Now()
	ca := egresstest.NewCA(t, "Receiver CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	clientCA := egresstest.NewCA(t, "Client CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	client := clientCA.Client(t, "hook-client", now.Add(-time.Hour), now.Add(90*24*time.Hour))
	soon := clientCA.Client(t, "soon-client", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	other := clientCA.Client(t, "other", now.Add(-time.Hour), now.Add(90*24*time.Hour))
	keyBodies := []string{egresstest.KeyBody(client.KeyPEM), egresstest.KeyBody(soon.KeyPEM), egresstest.KeyBody(other.KeyPEM)}
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		account, w, cookie, csrf, page := f.account, f.webhook, f.cookie, f.csrf, f.page
		path := page + "/tls"
		stored := func() *string { return f.stored().TLS }
		noKey := func(what, body string) {
			t.Helper()
			for _, s := range append([]string{"PRIVATE KEY"}, keyBodies...) {
				if strings.Contains(body, s) {
					t.Fatalf("%s shows a private key:\n%s", what, body)
				}
			}
		}

		rec := e.do(t, "GET", page, cookie, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), "no TLS settings") {
			t.Fatalf("the page of an endpoint without TLS:\n%s", rec.Body)
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"},
			"caCert": {ca.CertPEM}, "clientCert": {client.CertPEM}, "clientKey": {client.KeyPEM}})
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		noKey("the answer to a save", body)
		if s := stored(); s == nil || !shows(body, "CN=Receiver CA") || !shows(body, "CN=hook-client") || !shows(body, "••••••••") ||
			!shows(body, "The TLS settings were saved") || strings.Contains(body, "tls-expiring") {
			t.Fatalf("saved tls %v; the page:\n%s", s, body)
		}
		rec = e.do(t, "GET", page, cookie, nil)
		noKey("the page", rec.Body.String())

		// Replace with a certificate that expires within 14 days: the page warns.
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "clientCert": {soon.CertPEM}, "clientKey": {soon.KeyPEM}})
		expect(t, rec, http.StatusOK)
		body = rec.Body.String()
		noKey("the answer to a replace", body)
		if shows(body, "CN=Receiver CA") || !shows(body, "CN=soon-client") || !strings.Contains(body, `class="warning tls-expiring"`) {
			t.Fatalf("a replace's page:\n%s", body)
		}
		before := *stored()

		for _, c := range []struct {
			form  url.Values
			field string
		}{
			{url.Values{"do": {"save"}, "clientCert": {client.CertPEM}, "clientKey": {other.KeyPEM}}, "tls.clientKey"},
			{url.Values{"do": {"save"}, "caCert": {"<script>alert(1)</script>"}}, "tls.caCert"},
			{url.Values{"do": {"save"}, "clientCert": {client.CertPEM}}, "tls.clientKey"},
		} {
			c.form.Set("csrf", csrf)
			rec = e.do(t, "POST", path, cookie, c.form)
			expect(t, rec, http.StatusUnprocessableEntity)
			body := rec.Body.String()
			noKey("a refusal", body)
			if !strings.Contains(body, `class="error tls-error"`) || !shows(body, c.field) || strings.Contains(body, "<script>alert(1)") {
				t.Fatalf("the refusal of %v:\n%s", c.form, body)
			}
			if s := stored(); s == nil || *s != before {
				t.Fatalf("a refused save changed the TLS settings")
			}
		}

		expect(t, e.do(t, "POST", path, cookie, url.Values{"do": {"remove"}}), http.StatusForbidden)
		ro := e.enter(t, e.link(t, account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"remove"}}), http.StatusForbidden)
		if s := stored(); s == nil || *s != before {
			t.Fatalf("a refused remove changed the TLS settings")
		}
		rec = e.do(t, "GET", page, ro, nil)
		if strings.Contains(rec.Body.String(), `action="/portal/webhooks/`+fmt.Sprint(w.ID)+`/tls"`) || !shows(rec.Body.String(), "CN=soon-client") {
			t.Fatalf("a read-only page offers the TLS form, or hides the settings")
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"remove"}})
		expect(t, rec, http.StatusOK)
		if stored() != nil || !shows(rec.Body.String(), "The TLS settings were removed") || !shows(rec.Body.String(), "no TLS settings") {
			t.Fatalf("a remove left %v:\n%s", stored(), rec.Body)
		}
	})
}
