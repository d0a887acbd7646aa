package webhooks_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

func newService(t testing.TB, db *model.DB, maxWebhooks int64) *webhooks.Service {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return webhookstest.New(t, db, box, slog.New(slog.NewTextHandler(io.Discard, nil)), webhookstest.Config{MaxWebhooks: maxWebhooks})
}

var accounts atomic.Int64

// scopeOf is variant v of a new account.
func scopeOf(t *testing.T, db *model.DB, v model.Variant) model.WebhookScope {
	t.Helper()
	_, account, err := model.CreateAPIKey(t.Context(), db, fmt.Sprintf("owner%d@example.com", accounts.Add(1)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return model.WebhookScope{AccountID: account.ID, Variant: v}
}

// TestNewRefusesMissingLimits: the limits have their defaults in cmd/webhookd's Config only; a
// Config without one is refused, naming it, rather than refusing every webhook.
func TestNewRefusesMissingLimits(t *testing.T) {
	db := dbtest.SQLite(t)
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		clear func(*webhooks.Config)
	}{
		{"MaxWebhooks", func(c *webhooks.Config) { c.MaxWebhooks = 0 }},
		{"RequestTimeout", func(c *webhooks.Config) { c.RequestTimeout = 0 }},
		{"DB", func(c *webhooks.Config) { c.DB = nil }},
	} {
		cfg := webhooks.Config{DB: db, Secrets: box, MaxWebhooks: 1, RequestTimeout: time.Second}
		c.clear(&cfg)
		if _, err := webhooks.New(cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("without %s: New returned %v, want an error naming it", c.field, err)
		}
	}
}

// TestCreateRefusals: every rule of a registration refuses with the field it is about, the same
// for every surface, and a refused registration stores nothing.
func TestCreateRefusals(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	zero, big := 0, 10001
	for _, c := range []struct {
		name    string
		v       model.Variant
		r       webhooks.Registration
		field   string
		missing bool
	}{
		{"no event type", model.VariantA, webhooks.Registration{URL: "https://a.example.com/"}, "eventType", true},
		{"unknown event type", model.VariantA, webhooks.Registration{URL: "https://a.example.com/", EventType: "lead.captured"}, "eventType", false},
		{"the test event", model.VariantB, webhooks.Registration{URL: "https://a.example.com/", EventType: model.EventTest}, "eventType", false},
		{"no url", model.VariantB, webhooks.Registration{EventType: "lead.captured"}, "url", true},
		{"plain http", model.VariantB, webhooks.Registration{URL: "http://a.example.com/", EventType: "lead.captured"}, "url", false},
		{"private address", model.VariantB, webhooks.Registration{URL: "https://10.0.0.5/", EventType: "lead.captured"}, "url", false},
		{"rate limit 0", model.VariantA, webhooks.Registration{URL: "https://a.example.com/", EventType: "campaign.created",
			Settings: webhooks.Settings{RateLimit: model.LimitChange{Set: true, To: &zero}}}, "rateLimit", false},
		{"max in flight over", model.VariantA, webhooks.Registration{URL: "https://a.example.com/", EventType: "campaign.created",
			Settings: webhooks.Settings{MaxInFlight: model.LimitChange{Set: true, To: &big}}}, "maxInFlight", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			scope := scopeOf(t, db, c.v)
			_, _, err := s.Create(t.Context(), scope, c.r)
			var invalid *webhooks.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != c.field || invalid.Missing != c.missing {
				t.Fatalf("Create: %v (%#v), want an InvalidError of %s, missing %v", err, invalid, c.field, c.missing)
			}
			if hooks, err := s.List(t.Context(), scope, model.WebhookFilter{Limit: 10}); err != nil || len(hooks) != 0 {
				t.Fatalf("after a refusal: %d webhooks, %v", len(hooks), err)
			}
		})
	}
}

// TestCreateLimitAndTestEvent: the account's limit is a LimitError naming it; a variant B webhook
// commits with its test event, a variant A one without.
func TestCreateLimitAndTestEvent(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 1)
	for _, c := range []struct {
		v         model.Variant
		eventType string
		events    int
	}{{model.VariantA, "campaign.created", 0}, {model.VariantB, "lead.captured", 1}} {
		scope := scopeOf(t, db, c.v)
		w, secret, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://a.example.com/", EventType: c.eventType})
		if err != nil || secret == "" || strings.Contains(w.Secret, secret) {
			t.Fatalf("%s: Create: %v (secret given %v, sealed %v)", c.v, err, secret != "", !strings.Contains(w.Secret, secret))
		}
		page, err := model.EventLog(t.Context(), db, scope, model.EventFilter{Limit: 10})
		if err != nil || len(page.Events) != c.events {
			t.Fatalf("%s: %d events after the registration (%v), want %d", c.v, len(page.Events), err, c.events)
		}
		_, _, err = s.Create(t.Context(), scope, webhooks.Registration{URL: "https://b.example.com/", EventType: c.eventType})
		var limit *webhooks.LimitError
		if !errors.As(err, &limit) || limit.Max != 1 {
			t.Fatalf("%s: a second webhook: %v, want a LimitError of 1", c.v, err)
		}
	}
}

// TestTemporalUseCasesWithoutDispatcher: resend, retry and recover need Temporal; without a
// dispatcher each answers ErrUnavailable, and a recovery's window is checked before that.
func TestTemporalUseCasesWithoutDispatcher(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	scope := scopeOf(t, db, model.VariantA)
	w, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://a.example.com/", EventType: "campaign.created"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resend(t.Context(), w, 1, model.Now()); !errors.Is(err, webhooks.ErrUnavailable) {
		t.Errorf("Resend: %v", err)
	}
	if _, err := s.Retry(t.Context(), w); !errors.Is(err, webhooks.ErrUnavailable) {
		t.Errorf("Retry: %v", err)
	}
	if _, err := s.Recover(t.Context(), w, webhooks.Recovery{Since: model.Now().Add(-time.Hour)}); !errors.Is(err, webhooks.ErrUnavailable) {
		t.Errorf("Recover: %v", err)
	}
	until := model.Now().Add(-2 * time.Hour)
	var invalid *webhooks.InvalidError
	_, err = s.Recover(t.Context(), w, webhooks.Recovery{Since: model.Now().Add(-time.Hour), Until: &until})
	if !errors.As(err, &invalid) || invalid.Field != "since" || invalid.Detail() != "must be before until" {
		t.Errorf("Recover of an inverted window: %v", err)
	}
}

// TestRotateSecret: a secret of the caller's that breaks the rule is refused without its value in
// the message; rotations beyond MaxPreviousSecrets are a RotationLimitError; another account's
// webhook is not found.
func TestRotateSecret(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	scope := scopeOf(t, db, model.VariantB)
	w, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://a.example.com/", EventType: "lead.captured"})
	if err != nil {
		t.Fatal(err)
	}
	short := "whsec_tooshort"
	var invalid *webhooks.InvalidError
	if _, err := s.RotateSecret(t.Context(), scope, w.ID, &short); !errors.As(err, &invalid) || invalid.Field != "secret" || strings.Contains(err.Error(), short) {
		t.Fatalf("RotateSecret(%q): %v", short, err)
	}
	other := scopeOf(t, db, model.VariantB)
	if _, err := s.RotateSecret(t.Context(), other, w.ID, nil); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("RotateSecret from another account: %v", err)
	}
	for i := range webhooks.MaxPreviousSecrets {
		r, err := s.RotateSecret(t.Context(), scope, w.ID, nil)
		if err != nil || r.Secret == "" || !r.PreviousUntil.After(model.Now()) {
			t.Fatalf("rotation %d: %+v, %v", i+1, r.PreviousUntil, err)
		}
	}
	var limit *webhooks.RotationLimitError
	if _, err := s.RotateSecret(t.Context(), scope, w.ID, nil); !errors.As(err, &limit) {
		t.Fatalf("rotation %d: %v, want a RotationLimitError", webhooks.MaxPreviousSecrets+1, err)
	}
}

// TestWithoutSecrets: the operator's Service has no secret box; what needs one fails, plainly, and
// the rest (a list, a retry's check for Temporal) works.
func TestWithoutSecrets(t *testing.T) {
	db := dbtest.SQLite(t)
	s, err := webhooks.New(webhooks.Config{DB: db, MaxWebhooks: 10, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	scope := scopeOf(t, db, model.VariantA)
	if _, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://a.example.com/", EventType: "campaign.created"}); err == nil || !strings.Contains(err.Error(), "secret box") {
		t.Fatalf("Create without a secret box: %v", err)
	}
	if _, err := s.RotateSecret(t.Context(), scope, 1, nil); err == nil || !strings.Contains(err.Error(), "secret box") {
		t.Fatalf("RotateSecret without a secret box: %v", err)
	}
	if hooks, err := s.List(t.Context(), scope, model.WebhookFilter{Limit: 10}); err != nil || len(hooks) != 0 {
		t.Fatalf("List: %v, %v", hooks, err)
	}
	if _, err := s.Retry(t.Context(), &model.Webhook{ID: 1, Variant: model.VariantA}); !errors.Is(err, webhooks.ErrUnavailable) {
		t.Fatalf("Retry without a dispatcher: %v", err)
	}
}
