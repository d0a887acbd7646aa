package model_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func setState(t *testing.T, db bun.IDB, deliveryID int64, state string) {
	t.Helper()
	if err := dbtest.SetDeliveryState(context.Background(), db, deliveryID, state); err != nil {
		t.Fatal(err)
	}
}

func stateOf(t *testing.T, db bun.IDB, deliveryID int64) string {
	t.Helper()
	var d model.Delivery
	if err := db.NewSelect().Model(&d).Where("id = ?", deliveryID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d.State
}

// TestGetDelivery: one delivery of a webhook with its event and its attempts, each with the headers
// it sent; another webhook's delivery is not found through this one.
func TestGetDelivery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "get@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		other := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		id := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, id, 1, false, model.Now())
		headers := `{"Webhook-Id":"msg_1_2"}`
		o := model.AttemptOutcome{Success: true}
		o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.RequestHeaders = id, 2, w.URL, model.Now(), &headers
		if _, err := model.RecordAttempt(ctx, db, w, o); err != nil {
			t.Fatal(err)
		}

		v, err := model.GetDelivery(ctx, db, w.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != model.DeliveryDelivered || v.EventType != "lead.captured" || v.EventData != "{}" || v.EventOccurredAt.IsZero() || len(v.Log) != 2 {
			t.Fatalf("delivery = %+v", v)
		}
		if v.Log[0].RequestHeaders != nil || v.Log[1].RequestHeaders == nil || *v.Log[1].RequestHeaders != headers {
			t.Fatalf("request headers = %v, %v; want none for attempt 1 and %s for attempt 2", v.Log[0].RequestHeaders, v.Log[1].RequestHeaders, headers)
		}
		if _, err := model.GetDelivery(ctx, db, other.ID, id); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("another webhook's delivery: %v, want ErrNotFound", err)
		}
		if _, err := model.WebhookDeliveryRef(ctx, db, other.ID, id); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("another webhook's delivery ref: %v, want ErrNotFound", err)
		}
		ref, err := model.WebhookDeliveryRef(ctx, db, w.ID, id)
		if err != nil || ref.DeliveryID != id || ref.AccountID != acc.ID || ref.WebhookURL != w.URL || ref.State != model.DeliveryDelivered {
			t.Fatalf("ref = %+v, %v", ref, err)
		}
	})
}

// TestClaimReleaseRestore: a retry claims one delivery at a time, from the states it asks for:
// one that had ended (exhausted or delivered) moves to delivering, one still in its schedule keeps
// its state, and a delivery held by another claim or in another state is not claimed. A released
// claim is gone; a claim left standing is stale after its time; a restored one gives the delivery
// its state back unless an attempt has moved it on meanwhile.
func TestClaimReleaseRestore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "claim@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		states := []string{model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryRetrying}
		var refs []model.DeliveryRef
		for _, s := range states {
			id := deliveryFor(t, db, acc.ID, w)
			setState(t, db, id, s)
			ref, err := model.WebhookDeliveryRef(ctx, db, w.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, ref)
		}
		all := []string{model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryRetrying}
		if _, ok, err := model.ClaimDelivery(ctx, db, refs[1].DeliveryID, []string{model.DeliveryExhausted}); err != nil || ok {
			t.Fatalf("claim of a delivered delivery from exhausted only: ok %v, %v; want not claimed", ok, err)
		}
		var at []time.Time
		for i, r := range refs {
			claimedAt, ok, err := model.ClaimDelivery(ctx, db, r.DeliveryID, all)
			if err != nil || !ok {
				t.Fatalf("claim of the %s delivery: ok %v, %v", states[i], ok, err)
			}
			at = append(at, claimedAt)
			if _, again, err := model.ClaimDelivery(ctx, db, r.DeliveryID, all); err != nil || again {
				t.Fatalf("second claim of the %s delivery: ok %v, %v; want not claimed", states[i], again, err)
			}
		}
		for i, want := range []string{model.DeliveryDelivering, model.DeliveryDelivering, model.DeliveryRetrying} {
			if got := stateOf(t, db, refs[i].DeliveryID); got != want {
				t.Errorf("after the claim, the %s delivery is %s, want %s", states[i], got, want)
			}
		}
		stale, err := model.StaleClaims(ctx, db, model.Now().Add(time.Second), 10)
		if err != nil || len(stale) != 3 || stale[0].DeliveryID != refs[0].DeliveryID || !stale[0].ClaimedAt.Equal(at[0]) || stale[0].WebhookURL != w.URL {
			t.Fatalf("stale claims = %+v, %v; want the 3, oldest first", stale, err)
		}
		if stale, _ := model.StaleClaims(ctx, db, at[0], 10); len(stale) != 0 {
			t.Fatalf("claims older than the first = %+v, want none", stale)
		}

		// The exhausted one was handed over: released, it is no claim any more.
		if err := model.ReleaseClaim(ctx, db, refs[0].DeliveryID, at[0]); err != nil {
			t.Fatal(err)
		}
		// The resent delivery's attempt has already recorded its outcome: the restore leaves it.
		attempt(t, db, w, refs[1].DeliveryID, 2, true, model.Now())
		for _, i := range []int{1, 2} {
			if err := model.RestoreClaim(ctx, db, refs[i], at[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []string{model.DeliveryDelivering, model.DeliveryDelivered, model.DeliveryRetrying} {
			if got := stateOf(t, db, refs[i].DeliveryID); got != want {
				t.Errorf("after release and restore, the %s delivery is %s, want %s", states[i], got, want)
			}
		}
		if stale, _ := model.StaleClaims(ctx, db, model.Now().Add(time.Second), 10); len(stale) != 0 {
			t.Fatalf("claims left = %+v, want none", stale)
		}
		// A release of a claim made at another time (a newer claim) leaves the newer one.
		newer, ok, err := model.ClaimDelivery(ctx, db, refs[2].DeliveryID, all)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := model.ReleaseClaim(ctx, db, refs[2].DeliveryID, at[2]); err != nil {
			t.Fatal(err)
		}
		if stale, _ := model.StaleClaims(ctx, db, model.Now().Add(time.Second), 10); len(stale) != 1 || !stale[0].ClaimedAt.Equal(newer) {
			t.Fatalf("claims left = %+v, want the newer claim", stale)
		}
	})
}

// TestExhaustedBatches: a webhook-wide retry counts the webhook's exhausted deliveries up to the
// largest id, and reads them in batches after an id, never beyond that id.
func TestExhaustedBatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "exhausted@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		other := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		var want []int64
		for _, s := range []string{model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryExhausted, model.DeliveryRetrying, model.DeliveryExhausted} {
			id := deliveryFor(t, db, acc.ID, w)
			setState(t, db, id, s)
			if s == model.DeliveryExhausted {
				want = append(want, id)
			}
		}
		setState(t, db, deliveryFor(t, db, acc.ID, other), model.DeliveryExhausted)
		n, upTo, err := model.CountDeliveries(ctx, db, model.DeliveryQuery{WebhookID: w.ID, States: []string{model.DeliveryExhausted}})
		if err != nil || n != 3 || upTo != want[2] {
			t.Fatalf("count = %d up to %d (%v), want 3 up to %d", n, upTo, err, want[2])
		}
		setState(t, db, deliveryFor(t, db, acc.ID, w), model.DeliveryExhausted) // after the count
		var got []int64
		for after := int64(0); ; {
			page, err := model.ReadDeliveries(ctx, db, model.DeliveryQuery{WebhookID: w.ID, States: []string{model.DeliveryExhausted}, UpTo: upTo, After: after, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			refs := page.Refs()
			if len(refs) == 0 {
				break
			}
			for _, r := range refs {
				got = append(got, r.DeliveryID)
			}
			after = refs[len(refs)-1].DeliveryID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("batches = %v, want %v", got, want)
		}
	})
}

// TestRecoverable: a recovery selects the webhook's deliveries created in [since, until) that did
// not succeed (exhausted, retrying, or with an attempt in flight: pending or delivering), up to its
// largest id, in batches.
func TestRecoverable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "recover@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		other := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		// created_at is set for each delivery, apart from the window's ends.
		start := model.Now()
		before := deliveryAt(t, db, acc.ID, w, start)
		setState(t, db, before, model.DeliveryExhausted)
		since := start.Add(10 * time.Millisecond)
		inside := since.Add(time.Millisecond)
		var want []int64
		for _, s := range []string{model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryRetrying, model.DeliveryPending,
			model.DeliveryDelivering, model.DeliveryCanceled, model.DeliveryExhausted} {
			id := deliveryAt(t, db, acc.ID, w, inside)
			setState(t, db, id, s)
			if s != model.DeliveryDelivered && s != model.DeliveryCanceled {
				want = append(want, id)
			}
		}
		setState(t, db, deliveryAt(t, db, acc.ID, other, inside), model.DeliveryExhausted)
		until := inside.Add(10 * time.Millisecond)
		setState(t, db, deliveryAt(t, db, acc.ID, w, until.Add(10*time.Millisecond)), model.DeliveryExhausted)

		r := model.Recovery{WebhookID: w.ID, Since: since, Until: until}
		n, upTo, err := model.CountDeliveries(ctx, db, r.Query())
		if err != nil || n != len(want) || upTo != want[len(want)-1] {
			t.Fatalf("count = %d up to %d (%v), want %d up to %d", n, upTo, err, len(want), want[len(want)-1])
		}
		r.UpTo = upTo
		var got []int64
		for after := int64(0); ; {
			q := r.Query()
			q.After, q.Limit = after, 2
			page, err := model.ReadDeliveries(ctx, db, q)
			if err != nil {
				t.Fatal(err)
			}
			refs := page.Refs()
			if len(refs) == 0 {
				break
			}
			for _, ref := range refs {
				got = append(got, ref.DeliveryID)
			}
			after = refs[len(refs)-1].DeliveryID
		}
		if len(got) != len(want) {
			t.Fatalf("recoverable = %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("recoverable = %v, want %v", got, want)
			}
		}
		// A delivery that failed after the recovery was asked for is not its business.
		r.Until = model.Now().Add(time.Second)
		if n, _, _ := model.CountDeliveries(ctx, db, r.Query()); n != len(want) {
			t.Fatalf("count up to %d with the window widened = %d, want %d", r.UpTo, n, len(want))
		}
	})
}

// TestRecoveryCheck: an empty window, or one that starts in the future, is refused on its field.
func TestRecoveryCheck(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name         string
		since, until time.Time
		field        string
	}{
		{"ok", now.Add(-time.Hour), now, ""},
		{"empty", now.Add(-time.Hour), now.Add(-time.Hour), "since"},
		{"reversed", now, now.Add(-time.Hour), "since"},
		{"future", now.Add(time.Hour), now.Add(2 * time.Hour), "since"},
		{"year 0", time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), now, "since"},
		{"year 10000", now.Add(-time.Hour), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "until"},
	} {
		err := model.Recovery{Since: tt.since, Until: tt.until}.Check(now)
		var de *input.DataError
		if tt.field == "" && err != nil || tt.field != "" && (!errors.As(err, &de) || de.Field != tt.field) {
			t.Errorf("%s: Check = %v, want an error on %q", tt.name, err, tt.field)
		}
	}
}
