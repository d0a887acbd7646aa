package webhooks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
)

// newDeliveryWithAttempts registers a webhook of scope (no test event: variant A) and gives it one
// delivery with an attempt per outcome in ok, a minute apart, the last a minute ago.
func newDeliveryWithAttempts(t *testing.T, db *model.DB, s *webhooks.Service, scope model.WebhookScope, ok ...bool) (*model.Webhook, int64) {
	t.Helper()
	w, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://r.example.com/", EventType: "campaign.created"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(t.Context(), db, model.NewEvent{AccountID: scope.AccountID, Variant: scope.Variant,
		EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil || len(res.Deliveries) != 1 {
		t.Fatalf("publish: %+v, %v", res, err)
	}
	d := res.Deliveries[0].ID
	for i, success := range ok {
		o := model.AttemptOutcome{Success: success}
		o.DeliveryID, o.Attempt.Attempt, o.URL = d, i+1, w.URL
		o.StartedAt = model.Now().Add(-time.Duration(len(ok)-i) * time.Minute)
		if !success {
			class := "http_status"
			o.ErrorClass = &class
			next := model.Now().Add(time.Hour)
			o.NextAttemptAt = &next
		}
		if _, err := model.RecordAttempt(t.Context(), db, w, o); err != nil {
			t.Fatal(err)
		}
	}
	return w, d
}

// TestRecentIsHealthsDay: the recent activity of a list of webhooks, read for all of them at once,
// is what each webhook's health reads for its last 24 hours (one computation); another account's
// webhook in the list is absent.
func TestRecentIsHealthsDay(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	scope, other := scopeOf(t, db, model.VariantA), scopeOf(t, db, model.VariantA)
	a, _ := newDeliveryWithAttempts(t, db, s, scope, false, false, true)
	b, _ := newDeliveryWithAttempts(t, db, s, scope, true)
	idle, _ := newDeliveryWithAttempts(t, db, s, scope)
	foreign, _ := newDeliveryWithAttempts(t, db, s, other, true, true)
	recent, err := s.Recent(t.Context(), scope, []int64{a.ID, b.ID, idle.ID, foreign.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recent[foreign.ID]; ok || len(recent) != 3 {
		t.Fatalf("recent = %+v, want a, b and idle only", recent)
	}
	for _, w := range []*model.Webhook{a, b, idle} {
		h, err := s.Health(t.Context(), scope, w.ID, webhooks.HealthDay)
		if err != nil {
			t.Fatal(err)
		}
		day := h.TotalsSince(h.To.Add(-webhooks.RateWindow))
		if got := recent[w.ID]; got.Day != day || !got.LastAttempt.Equal(h.LastAttempt) {
			t.Fatalf("webhook %d: recent %+v, health's day %+v and last attempt %v", w.ID, got, day, h.LastAttempt)
		}
	}
	if got := recent[a.ID].Day; got != (webhooks.Totals{Delivered: 1, Retried: 2}) {
		t.Fatalf("a's day = %+v", got)
	}
}

// TestDeliveryIsScopedByTheRead: a delivery is read within the scope that asks, with its webhook:
// another account's delivery, or a deleted webhook's, is not found, even by its id alone.
func TestDeliveryIsScopedByTheRead(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	scope, other := scopeOf(t, db, model.VariantA), scopeOf(t, db, model.VariantA)
	w, mine := newDeliveryWithAttempts(t, db, s, scope, false, true)
	_, theirs := newDeliveryWithAttempts(t, db, s, other, true)
	got, v, err := s.Delivery(t.Context(), scope, 0, mine, model.IncludeAttempts|model.IncludeEvent)
	if err != nil || got.ID != w.ID || v.ID != mine || len(v.Log) != 2 || v.EventData != `{}` {
		t.Fatalf("own delivery: %+v, %+v, %v", got, v, err)
	}
	if _, _, err := s.Delivery(t.Context(), scope, 0, theirs, 0); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another account's delivery: err = %v, want not found", err)
	}
	// The read itself is scoped: not only the webhook loaded after it.
	for _, q := range []model.DeliveryQuery{{DeliveryID: theirs}, {}} {
		page, err := s.Deliveries(t.Context(), scope, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Views {
			if v.ID == theirs || v.AccountID != scope.AccountID {
				t.Fatalf("read %+v: another account's delivery %d in scope", q, v.ID)
			}
		}
	}
	if _, _, err := s.Delivery(t.Context(), other, w.ID, mine, 0); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("by another account through the webhook's id: err = %v, want not found", err)
	}
	if err := s.Delete(t.Context(), scope, w.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delivery(t.Context(), scope, 0, mine, 0); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("a deleted webhook's delivery: err = %v, want not found", err)
	}
}
