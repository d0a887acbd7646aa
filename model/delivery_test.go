package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

func newWebhook(t testing.TB, db bun.IDB, accountID int64, v model.Variant, eventType string) *model.Webhook {
	t.Helper()
	now := model.Now()
	w := &model.Webhook{AccountID: accountID, Variant: v, URL: "https://r.example.com/", EventType: eventType,
		Status: v.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(context.Background(), db, w, 100); err != nil {
		t.Fatal(err)
	}
	return w
}

func reload(t *testing.T, db bun.IDB, id int64) *model.Webhook {
	t.Helper()
	w := &model.Webhook{}
	if err := db.NewSelect().Model(w).WhereAllWithDeleted().Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestInsertEventFansOut: one delivery per live webhook of that account and variant subscribed to
// the type, and nothing for anyone else.
func TestInsertEventFansOut(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "fan@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "other@example.com", "")
		a := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		b := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		newWebhook(t, db, acc.ID, model.VariantB, "presave.completed")
		newWebhook(t, db, other.ID, model.VariantB, "lead.captured")
		gone := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		if err := model.DeleteWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}, gone.ID); err != nil {
			t.Fatal(err)
		}
		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured", Data: `{"x":1}`})
		if err != nil {
			t.Fatal(err)
		}
		if res.Event.Matched != 2 || len(res.Deliveries) != 2 || res.Deliveries[0].WebhookID != a.ID || res.Deliveries[1].WebhookID != b.ID {
			t.Fatalf("fan-out = %+v", res.Deliveries)
		}
		only, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantB, EventType: model.EventTest, Data: `{}`, OnlyWebhook: b.ID})
		if err != nil || len(only.Deliveries) != 1 || only.Deliveries[0].WebhookID != b.ID {
			t.Fatalf("test event fan-out = %+v, %v", only, err)
		}
		refs, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Second), 10)
		if err != nil || len(refs) != 3 {
			t.Fatalf("undispatched = %+v, %v", refs, err)
		}
		if err := model.MarkDispatched(ctx, db, []int64{refs[0].DeliveryID}); err != nil {
			t.Fatal(err)
		}
		if refs, _ := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Second), 10); len(refs) != 2 {
			t.Fatalf("undispatched after marking one = %d, want 2", len(refs))
		}
	})
}

// TestUndispatchedTakeTurns: the sweeper's batch takes accounts in turns, so an account whose one
// delivery missed its start is not queued behind another account's backlog.
func TestUndispatchedTakeTurns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, noisy, _ := model.CreateAPIKey(ctx, db, "noisy@example.com", "")
		_, quiet, _ := model.CreateAPIKey(ctx, db, "quiet@example.com", "")
		for range 5 {
			newWebhook(t, db, noisy.ID, model.VariantA, "campaign.created")
		}
		newWebhook(t, db, quiet.ID, model.VariantA, "campaign.created")
		for range 3 {
			if _, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: noisy.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`}); err != nil {
				t.Fatal(err)
			}
		}
		late, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: quiet.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`})
		if err != nil {
			t.Fatal(err)
		}
		refs, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Second), 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 2 || refs[0].AccountID != noisy.ID || refs[1].AccountID != quiet.ID || refs[1].DeliveryID != late.Deliveries[0].ID {
			t.Fatalf("first batch of 2 = %+v, want the noisy account's oldest, then the quiet account's one", refs)
		}
		all, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Second), 100)
		if err != nil || len(all) != 16 {
			t.Fatalf("all undispatched = %d, %v; want 15 + 1", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].AccountID == noisy.ID && all[i-1].AccountID == noisy.ID && all[i].DeliveryID < all[i-1].DeliveryID {
				t.Fatalf("one account's deliveries out of order: %d after %d", all[i].DeliveryID, all[i-1].DeliveryID)
			}
		}
	})
}

func TestIdempotencyKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "idem@example.com", "")
		newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		ne := model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{"a":1}`,
			IdempotencyKey: "k1", RequestHash: model.HashRequest("campaign.created", `{"a":1}`)}
		first, err := model.InsertEvent(ctx, db, ne)
		if err != nil || first.Replayed {
			t.Fatalf("first = %+v, %v", first, err)
		}
		again, err := model.InsertEvent(ctx, db, ne)
		if err != nil || !again.Replayed || again.Event.ID != first.Event.ID || len(again.Deliveries) != 1 {
			t.Fatalf("replay = %+v, %v", again, err)
		}
		other := ne
		other.Data, other.RequestHash = `{"a":2}`, model.HashRequest("campaign.created", `{"a":2}`)
		if _, err := model.InsertEvent(ctx, db, other); !errors.Is(err, model.ErrIdempotencyConflict) {
			t.Fatalf("reuse with another body: %v", err)
		}
		// The same key in the other variant is another key.
		otherVariant := ne
		otherVariant.Variant = model.VariantB
		if res, err := model.InsertEvent(ctx, db, otherVariant); err != nil || res.Replayed {
			t.Fatalf("other variant = %+v, %v", res, err)
		}
		// After 24 hours the key is free again.
		if _, err := db.NewUpdate().Table("events").Set("created_at = ?", model.Now().Add(-25*time.Hour)).Where("id = ?", first.Event.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		fresh, err := model.InsertEvent(ctx, db, other)
		if err != nil || fresh.Replayed || fresh.Event.ID == first.Event.ID {
			t.Fatalf("after expiry = %+v, %v", fresh, err)
		}
	})
}

func attempt(t *testing.T, db bun.IDB, w *model.Webhook, deliveryID int64, n int, ok bool, at time.Time) {
	t.Helper()
	attemptWith(t, db, w, deliveryID, n, ok, at, notices.Rules{})
}

// attemptWith records an attempt as attempt does, under the notices' rules.
func attemptWith(t *testing.T, db bun.IDB, w *model.Webhook, deliveryID int64, n int, ok bool, at time.Time, rules notices.Rules) {
	t.Helper()
	o := model.AttemptOutcome{Success: ok, Rules: rules}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt = deliveryID, n, w.URL, at
	if !ok {
		class, msg := "http_status", "receiver answered 500"
		o.ErrorClass, o.Error = &class, &msg
	}
	// As the activity does: the webhook as it is when the attempt starts.
	if _, err := model.RecordAttempt(context.Background(), db, reload(t, db, w.ID), o); err != nil {
		t.Fatal(err)
	}
}

func deliveryFor(t *testing.T, db bun.IDB, accountID int64, w *model.Webhook) int64 {
	t.Helper()
	return deliveryAt(t, db, accountID, w, time.Time{})
}

// deliveryAt is deliveryFor with the delivery created at at (zero: now).
func deliveryAt(t *testing.T, db bun.IDB, accountID int64, w *model.Webhook, at time.Time) int64 {
	t.Helper()
	res, err := model.InsertEvent(context.Background(), db, model.NewEvent{AccountID: accountID, Variant: w.Variant, EventType: w.EventType, Data: `{}`, OnlyWebhook: w.ID, At: at})
	if err != nil {
		t.Fatal(err)
	}
	return res.Deliveries[0].ID
}

// TestStatusRulesA follows spec 3.1: failure -> failed at once, success from pending or failed ->
// processing, updatedAt moving with each status change only.
func TestStatusRulesA(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "a@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		d := deliveryFor(t, db, acc.ID, w)
		base := model.Now()

		attempt(t, db, w, d, 1, false, base.Add(time.Second))
		got := reload(t, db, w.ID)
		if got.Status != model.StatusFailed || !got.UpdatedAt.After(w.UpdatedAt) {
			t.Fatalf("after a failure: %s, updatedAt %v (was %v)", got.Status, got.UpdatedAt, w.UpdatedAt)
		}
		failedAt := got.UpdatedAt
		attempt(t, db, w, d, 2, false, base.Add(2*time.Second))
		if got := reload(t, db, w.ID); got.Status != model.StatusFailed || !got.UpdatedAt.Equal(failedAt) {
			t.Fatalf("a second failure changed updatedAt without a status change: %v -> %v", failedAt, got.UpdatedAt)
		}
		attempt(t, db, w, d, 3, true, base.Add(3*time.Second))
		if got := reload(t, db, w.ID); got.Status != model.StatusProcessing {
			t.Fatalf("after a success: %s", got.Status)
		}
		// An attempt that started earlier but finished later must not overwrite the newer outcome.
		attempt(t, db, w, d, 4, false, base.Add(2500*time.Millisecond))
		if got := reload(t, db, w.ID); got.Status != model.StatusProcessing {
			t.Fatalf("a stale failure overwrote a newer success: %s", got.Status)
		}
		// finished is reserved and never left automatically.
		if _, err := db.NewUpdate().Table("webhooks").Set("status = ?", model.StatusFinished).Where("id = ?", w.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		attempt(t, db, w, d, 5, true, base.Add(5*time.Second))
		if got := reload(t, db, w.ID); got.Status != model.StatusFinished {
			t.Fatalf("finished moved to %s", got.Status)
		}
	})
}

// TestStatusRulesB: attempts update lastTriggered and lastStatus (a second or more apart here, see
// TestWebhookRowWrittenOnlyOnChange), each exhausted delivery
// failureCount; exhaustion moves to failing and alerts once; a success heals and re-arms the alert.
func TestStatusRulesB(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "b@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		d1, d2 := deliveryFor(t, db, acc.ID, w), deliveryFor(t, db, acc.ID, w)
		base := model.Now()

		attempt(t, db, w, d1, 1, false, base.Add(time.Second))
		attempt(t, db, w, d2, 1, false, base.Add(2*time.Second))
		got := reload(t, db, w.ID)
		if got.Status != model.StatusActive || got.FailureCount != 0 || *got.LastStatus != model.LastStatusFailed || !got.LastTriggeredAt.Equal(base.Add(2*time.Second)) {
			t.Fatalf("after two failed attempts: %+v", got)
		}
		alert, err := exhaust(ctx, db, d1, w.ID, base.Add(time.Second))
		if err != nil || !alert {
			t.Fatalf("first exhaustion alert = %v, %v", alert, err)
		}
		alert, err = exhaust(ctx, db, d2, w.ID, base.Add(2*time.Second))
		if err != nil || alert {
			t.Fatalf("second exhaustion alerted again: %v, %v", alert, err)
		}
		if got := reload(t, db, w.ID); got.Status != model.StatusFailing || got.FailureCount != 2 {
			t.Fatalf("after exhaustion: %s, failureCount %d", got.Status, got.FailureCount)
		}
		attempt(t, db, w, d1, 2, true, base.Add(3*time.Second))
		got = reload(t, db, w.ID)
		if got.Status != model.StatusActive || got.FailureCount != 0 || *got.LastStatus != model.LastStatusSuccess {
			t.Fatalf("after a success: %+v", got)
		}
		// The next move into failing alerts again.
		attempt(t, db, w, d2, 2, false, base.Add(4*time.Second))
		if alert, err := exhaust(ctx, db, d2, w.ID, base.Add(4*time.Second)); err != nil || !alert {
			t.Fatalf("re-armed alert = %v, %v", alert, err)
		}
		// An exhaustion older than the latest status change does not fail a healed webhook.
		attempt(t, db, w, d1, 3, true, base.Add(5*time.Second))
		if alert, err := exhaust(ctx, db, d2, w.ID, base.Add(4*time.Second)); err != nil || alert {
			t.Fatalf("stale exhaustion = %v, %v", alert, err)
		}
		if got := reload(t, db, w.ID); got.Status != model.StatusActive {
			t.Fatalf("stale exhaustion failed a healed webhook: %s", got.Status)
		}
	})
}

// TestFailureCountCountsDeliveries: failureCount is failed deliveries since the last success (issue
// 8, #10): the attempts of one delivery add nothing until its schedule is exhausted, then 1, once
// even when the exhausting activity runs twice; a success resets it, and an exhaustion older than
// that success does not count.
func TestFailureCountCountsDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "count@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		base := model.Now()
		count := func(want int, when string) {
			t.Helper()
			if got := reload(t, db, w.ID).FailureCount; got != want {
				t.Fatalf("failureCount %s = %d, want %d", when, got, want)
			}
		}

		d1 := deliveryFor(t, db, acc.ID, w)
		for n := 1; n <= 6; n++ {
			attempt(t, db, w, d1, n, false, base.Add(time.Duration(n)*time.Second))
		}
		count(0, "after 6 failed attempts of one delivery")
		for range 2 { // a retried MarkExhausted activity
			if _, err := exhaust(ctx, db, d1, w.ID, base.Add(6*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		count(1, "after that delivery is exhausted")

		d2 := deliveryFor(t, db, acc.ID, w)
		for n := 1; n <= 6; n++ {
			attempt(t, db, w, d2, n, false, base.Add(time.Duration(10+n)*time.Second))
		}
		if _, err := exhaust(ctx, db, d2, w.ID, base.Add(16*time.Second)); err != nil {
			t.Fatal(err)
		}
		count(2, "after a second exhausted delivery")

		d3 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d3, 1, false, base.Add(20*time.Second))
		attempt(t, db, w, d3, 2, true, base.Add(21*time.Second))
		count(0, "after a success")

		// d4 failed before the success and is exhausted after it: not part of the current failure.
		d4 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d4, 1, false, base.Add(19*time.Second))
		if _, err := exhaust(ctx, db, d4, w.ID, base.Add(19*time.Second)); err != nil {
			t.Fatal(err)
		}
		count(0, "after an exhaustion older than the success")
	})
}

// TestWebhookRowWrittenOnlyOnChange: attempts that change nothing but the time, closer together than
// StatusResolution, leave the webhook row alone (updated_at and lastTriggered stay); a status change
// is written at once even within that window, judged on the row as it is, not on the caller's stale
// copy; and a lag of StatusResolution is written.
func TestWebhookRowWrittenOnlyOnChange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "b@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		d := deliveryFor(t, db, acc.ID, w)
		base := model.Now()
		writes := func() []any {
			var row struct {
				StatusAt  time.Time `bun:"status_at"`
				UpdatedAt time.Time `bun:"updated_at"`
			}
			if err := db.NewSelect().Table("webhooks").Column("status_at", "updated_at").Where("id = ?", w.ID).Scan(ctx, &row); err != nil {
				t.Fatal(err)
			}
			return []any{row.StatusAt.UTC(), row.UpdatedAt.UTC()}
		}

		attempt(t, db, w, d, 1, true, base)
		first := writes()
		attempt(t, db, w, d, 2, true, base.Add(100*time.Millisecond))
		if got := writes(); fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("a success 100ms after another rewrote the row: %v, was %v", got, first)
		}
		if got := reload(t, db, w.ID); !got.LastTriggeredAt.Equal(base) || *got.LastStatus != model.LastStatusSuccess {
			t.Fatalf("lastTriggered %v, lastStatus %s: want the first success's", got.LastTriggeredAt, *got.LastStatus)
		}

		// A failure within the window changes lastStatus: written.
		attempt(t, db, w, d, 3, false, base.Add(200*time.Millisecond))
		if got := reload(t, db, w.ID); *got.LastStatus != model.LastStatusFailed || !got.LastTriggeredAt.Equal(base.Add(200*time.Millisecond)) {
			t.Fatalf("a failure within the window was not written: %+v", got)
		}

		// The webhook became failing behind the caller's back (another delivery's exhaustion); the
		// caller's copy still says active. The next success heals it at once.
		if _, err := db.NewUpdate().Table("webhooks").Set("status = ?", model.StatusFailing).Set("alerted_at = ?", base).Where("id = ?", w.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		attempt(t, db, w, d, 4, true, base.Add(300*time.Millisecond))
		if got := reload(t, db, w.ID); got.Status != model.StatusActive || *got.LastStatus != model.LastStatusSuccess {
			t.Fatalf("a success did not heal a webhook failing since the caller loaded it: %+v", got)
		}

		// Same outcome, StatusResolution later: the time moves.
		at := base.Add(300*time.Millisecond + model.StatusResolution)
		attempt(t, db, w, d, 5, true, at)
		if got := reload(t, db, w.ID); !got.LastTriggeredAt.Equal(at) {
			t.Fatalf("lastTriggered %v after a success %s later, want %v", got.LastTriggeredAt, model.StatusResolution, at)
		}
	})
}
