package webhooks_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
)

// TestTLSSettings: TLS settings are refused naming the field, with nothing stored and no PEM in
// the message; accepted ones are sealed (the key nowhere in the row), their earliest notAfter
// stored in the clear, and shown by RedactedTLS without the key and with the expiry warning.
func TestTLSSettings(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	now := time.Now()
	ca := egresstest.NewCA(t, "CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	client := ca.Client(t, "client", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	other := ca.Client(t, "other", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	expired := ca.Client(t, "expired", now.Add(-48*time.Hour), now.Add(-time.Hour))
	raw := func(fields map[string]string) webhooks.Settings {
		b, _ := json.Marshal(fields)
		return webhooks.Settings{TLS: webhooks.TLSEdit{Set: true, JSON: b}}
	}
	register := func(settings webhooks.Settings) (*model.Webhook, model.WebhookScope, error) {
		scope := scopeOf(t, db, model.VariantA)
		w, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://a.example.com/", EventType: "campaign.created", Settings: settings})
		return w, scope, err
	}
	// quotes: a refusal repeats a value sent (a PEM's first line of base64, or a text's first line).
	quotes := func(msg string, fields map[string]string) bool {
		for _, v := range fields {
			lines := strings.Split(v, "\n")
			if len(lines) > 1 {
				lines = lines[1:]
			}
			if strings.Contains(msg, lines[0]) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name   string
		fields map[string]string
		field  string
	}{
		{"garbage PEM", map[string]string{"caCert": "garbage"}, "tls.caCert"},
		{"key not matching", map[string]string{"clientCert": client.CertPEM, "clientKey": other.KeyPEM}, "tls.clientKey"},
		{"expired", map[string]string{"clientCert": expired.CertPEM, "clientKey": expired.KeyPEM}, "tls.clientCert"},
		{"clientCert without clientKey", map[string]string{"clientCert": client.CertPEM}, "tls.clientKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, scope, err := register(raw(c.fields))
			var invalid *webhooks.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != c.field || quotes(err.Error(), c.fields) {
				t.Fatalf("Create: %v, want an InvalidError of %s without a PEM", err, c.field)
			}
			if hooks, err := s.List(t.Context(), scope, model.WebhookFilter{Limit: 10}); err != nil || len(hooks) != 0 {
				t.Fatalf("after a refusal: %d webhooks, %v", len(hooks), err)
			}
		})
	}

	w, _, err := register(raw(map[string]string{"caCert": ca.CertPEM, "clientCert": client.CertPEM, "clientKey": client.KeyPEM}))
	if err != nil {
		t.Fatal(err)
	}
	if w.TLS == nil || strings.Contains(*w.TLS, "PRIVATE") || strings.Contains(*w.TLS, egresstest.KeyBody(client.KeyPEM)) {
		t.Fatalf("stored tls %v, want ciphertext", w.TLS)
	}
	info, err := s.RedactedTLS(w)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClientKey != webhooks.AuthMask || info.ClientCert == nil || info.ClientCert.Subject != "CN=client" || info.CACert == nil ||
		!info.Expiring || !info.ExpiresAt.Equal(w.TLSExpiresAt.UTC()) {
		t.Fatalf("RedactedTLS = %+v", info)
	}
}
