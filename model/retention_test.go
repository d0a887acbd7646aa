package model_test

import (
	"context"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// TestPurgeExpired: rows past retention go, in bounded batches, children first; younger rows, an
// unfinished delivery however old, and a recently retried old delivery stay, each with its event.
func TestPurgeExpired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "retention@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		hook := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		other := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		now := model.Now()
		days := func(n int) time.Time { return now.Add(-time.Duration(n) * 24 * time.Hour) }
		before := days(30)

		event := func(created time.Time) int64 {
			t.Helper()
			ev := &model.Event{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured", Data: `{}`, OccurredAt: created, CreatedAt: created}
			if _, err := db.NewInsert().Model(ev).Returning("id").Exec(ctx); err != nil {
				t.Fatal(err)
			}
			return ev.ID
		}
		delivery := func(eventID, webhookID int64, state string, created, updated time.Time, attempts int) int64 {
			t.Helper()
			d := &model.Delivery{EventID: eventID, WebhookID: webhookID, State: state, Attempts: attempts,
				DispatchedAt: &created, CreatedAt: created, UpdatedAt: updated}
			if state == model.DeliveryPending {
				d.DispatchedAt = nil
			}
			if _, err := db.NewInsert().Model(d).Returning("id").Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= attempts; i++ {
				a := &model.Attempt{DeliveryID: d.ID, Attempt: i, URL: "https://r.example.com/", StartedAt: created, LatencyMS: 5}
				if _, err := db.NewInsert().Model(a).Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
			return d.ID
		}

		var goneEvents, keptEvents, goneDeliveries, keptDeliveries []int64
		gone := func(ev int64, ds ...int64) {
			goneEvents = append(goneEvents, ev)
			goneDeliveries = append(goneDeliveries, ds...)
		}
		kept := func(ev int64, ds ...int64) {
			keptEvents = append(keptEvents, ev)
			keptDeliveries = append(keptDeliveries, ds...)
		}
		// Expired: finished and last changed before the cutoff, with their attempts and events.
		e := event(days(40))
		gone(e, delivery(e, hook.ID, model.DeliveryDelivered, days(40), days(40), 3))
		e = event(days(40))
		gone(e, delivery(e, hook.ID, model.DeliveryExhausted, days(40), days(32), 2))
		e = event(days(35))
		gone(e, delivery(e, hook.ID, model.DeliveryCanceled, days(35), days(34), 0))
		gone(event(days(31))) // no subscriber ever
		// Unfinished: its workflow may still be at work, however old the delivery is.
		e = event(days(60))
		kept(e, delivery(e, hook.ID, model.DeliveryRetrying, days(60), days(60), 1))
		e = event(days(60))
		kept(e, delivery(e, hook.ID, model.DeliveryPending, days(60), days(60), 0))
		// Old but retried by hand two days ago: its whole log stays.
		e = event(days(45))
		kept(e, delivery(e, hook.ID, model.DeliveryDelivered, days(45), days(2), 6))
		// One delivery of the event is expired, the other is not: the event stays for the second.
		e = event(days(40))
		goneDeliveries = append(goneDeliveries, delivery(e, hook.ID, model.DeliveryDelivered, days(40), days(40), 1))
		kept(e, delivery(e, other.ID, model.DeliveryExhausted, days(40), days(1), 5))
		// Younger than retention.
		e = event(days(29))
		kept(e, delivery(e, hook.ID, model.DeliveryDelivered, days(29), days(29), 1))
		e = event(days(1))
		kept(e)

		// Batches of 2 rows: the three kept rows at the old end take more than a batch to pass over.
		const limit = 2
		var total model.Purged
		var cursor model.PurgeCursor
		batches := 0
		for {
			b, err := model.PurgeExpired(ctx, db, before, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			batches++
			if b.Deliveries > limit || b.Events > limit || b.Attempts > limit*3 {
				t.Fatalf("batch %d deleted %+v: more than %d deliveries (with their attempts) or events", batches, b.Purged, limit)
			}
			total.Attempts += b.Attempts
			total.Deliveries += b.Deliveries
			total.Events += b.Events
			cursor = b.Next
			if b.Done {
				break
			}
			if batches > 20 {
				t.Fatalf("not done after %d batches: %+v", batches, total)
			}
		}
		if want := (model.Purged{Attempts: 3 + 2 + 1, Deliveries: 4, Events: 4}); total != want {
			t.Errorf("purged %+v in %d batches, want %+v", total, batches, want)
		}
		// 11 deliveries and 11 events in batches of 2.
		if batches < 6 {
			t.Errorf("done after %d batches of %d", batches, limit)
		}

		count := func(model any, column string, ids []int64) int {
			t.Helper()
			n, err := db.NewSelect().Model(model).Where("? IN (?)", bun.Ident(column), bun.List(ids)).Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		if n := count((*model.Event)(nil), "id", goneEvents); n != 0 {
			t.Errorf("%d of the expired events %v are left", n, goneEvents)
		}
		if n := count((*model.Delivery)(nil), "id", goneDeliveries); n != 0 {
			t.Errorf("%d of the expired deliveries %v are left", n, goneDeliveries)
		}
		if n := count((*model.Attempt)(nil), "delivery_id", goneDeliveries); n != 0 {
			t.Errorf("%d attempts of expired deliveries are left", n)
		}
		if n := count((*model.Event)(nil), "id", keptEvents); n != len(keptEvents) {
			t.Errorf("%d of the %d events to keep are left", n, len(keptEvents))
		}
		if n := count((*model.Delivery)(nil), "id", keptDeliveries); n != len(keptDeliveries) {
			t.Errorf("%d of the %d deliveries to keep are left", n, len(keptDeliveries))
		}
		if n := count((*model.Attempt)(nil), "delivery_id", keptDeliveries); n != 1+6+5+1 {
			t.Errorf("%d attempts of kept deliveries are left, want 13", n)
		}
		// Webhooks and accounts are never purged.
		if n := count((*model.Webhook)(nil), "id", []int64{hook.ID, other.ID}); n != 2 {
			t.Errorf("%d of 2 webhooks left", n)
		}

		// A second pass examines the kept rows again and deletes nothing.
		if b, err := model.PurgeExpired(ctx, db, before, model.PurgeCursor{}, 100); err != nil || b.Purged != (model.Purged{}) || !b.Done {
			t.Errorf("second pass = %+v, %v; want nothing deleted, done", b, err)
		}
		if _, err := model.PurgeExpired(ctx, db, before, model.PurgeCursor{}, 0); err == nil {
			t.Error("a batch of 0 rows was accepted")
		}
	})
}
