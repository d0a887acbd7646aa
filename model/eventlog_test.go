package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
)

// publishAt stores an event as intake does and moves its occurredAt to at.
func publishAt(t *testing.T, db bun.IDB, accountID int64, v model.Variant, eventType string, at time.Time) *model.PublishResult {
	t.Helper()
	ctx := context.Background()
	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: accountID, Variant: v, EventType: eventType, Data: `{"n":1}`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.NewUpdate().Model(res.Event).Set("occurred_at = ?", at).WherePK().Exec(ctx); err != nil {
		t.Fatal(err)
	}
	res.Event.OccurredAt = at
	return res
}

func eventIDs(events []model.Event) []int64 {
	ids := make([]int64, len(events))
	for i, ev := range events {
		ids[i] = ev.ID
	}
	return ids
}

// TestListEvents: a page holds the events of one account and variant in id order; the type filter,
// the [since, until) window on occurredAt (exact to the microsecond stored, also for bounds finer
// than that) and after/limit narrow it.
func TestListEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "log@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "other-log@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		var mine []int64
		for i, typ := range []string{"lead.captured", "presave.completed", "lead.captured", model.EventTest} {
			mine = append(mine, publishAt(t, db, acc.ID, model.VariantB, typ, t0.Add(time.Duration(i)*time.Hour+time.Microsecond)).Event.ID)
			// Interleaved: the other account's and the other variant's events share the id sequence.
			publishAt(t, db, other.ID, model.VariantB, typ, t0)
			publishAt(t, db, acc.ID, model.VariantA, "campaign.created", t0)
		}
		at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
		cases := []struct {
			name string
			f    model.EventFilter
			want []int64
		}{
			{"all", model.EventFilter{}, mine},
			{"type", model.EventFilter{EventType: "lead.captured"}, []int64{mine[0], mine[2]}},
			{"test events", model.EventFilter{EventType: model.EventTest}, mine[3:]},
			{"after and limit", model.EventFilter{After: mine[0], Limit: 2}, mine[1:3]},
			{"since is inclusive", model.EventFilter{Since: at(time.Hour + time.Microsecond)}, mine[1:]},
			{"until is exclusive", model.EventFilter{Until: at(2*time.Hour + time.Microsecond)}, mine[:2]},
			{"window", model.EventFilter{Since: at(time.Hour), Until: at(3 * time.Hour)}, mine[1:3]},
			// Bounds finer than the microseconds stored: the first event occurred at
			// 10:00:00.000001, after a since of 10:00:00.000000999 and before one of
			// 10:00:00.000001001; the second at 11:00:00.000001, likewise around until.
			{"since below a microsecond", model.EventFilter{Since: at(999 * time.Nanosecond)}, mine},
			{"since above a microsecond", model.EventFilter{Since: at(1001 * time.Nanosecond)}, mine[1:]},
			{"until below a microsecond", model.EventFilter{Until: at(time.Hour + 999*time.Nanosecond)}, mine[:1]},
			{"until above a microsecond", model.EventFilter{Until: at(time.Hour + 1001*time.Nanosecond)}, mine[:2]},
			{"the edges of time", model.EventFilter{Since: &input.MinTime, Until: &input.MaxTime}, mine},
			{"nothing", model.EventFilter{Since: at(-2 * time.Hour), Until: at(-time.Hour)}, []int64{}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.f.Limit == 0 {
					tc.f.Limit = 50
				}
				page, err := model.ListEvents(ctx, db, scope, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				if got := eventIDs(page.Events); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("ids = %v, want %v", got, tc.want)
				}
			})
		}
		page, _ := model.ListEvents(ctx, db, scope, model.EventFilter{Limit: 1})
		if ev := page.Events[0]; ev.AccountID != acc.ID || ev.Variant != model.VariantB || ev.EventType != "lead.captured" ||
			ev.Data != `{"n":1}` || !ev.OccurredAt.Equal(t0.Add(time.Microsecond)) {
			t.Fatalf("listed event = %+v", ev)
		}
	})
}

// TestGetEventAndDeliveries: an event is found only within its account and variant; its
// deliveries come in id order with their states, a deleted webhook's included, and one query counts
// the states of a page of events.
func TestGetEventAndDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "get-event@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "get-event-other@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		hooks := []*model.Webhook{
			newWebhook(t, db, acc.ID, model.VariantA, "campaign.created"),
			newWebhook(t, db, acc.ID, model.VariantA, "campaign.created"),
			newWebhook(t, db, acc.ID, model.VariantA, "campaign.created"),
		}
		res := publishAt(t, db, acc.ID, model.VariantA, "campaign.created", model.Now())
		lonely := publishAt(t, db, acc.ID, model.VariantA, "campaign.updated", model.Now())
		setState(t, db, res.Deliveries[0].ID, model.DeliveryDelivered)
		setState(t, db, res.Deliveries[1].ID, model.DeliveryExhausted)
		if err := model.DeleteWebhook(ctx, db, scope, hooks[2].ID); err != nil {
			t.Fatal(err)
		}
		if err := model.CancelOpenDeliveries(ctx, db, hooks[2].ID); err != nil {
			t.Fatal(err)
		}

		ev, err := model.GetEvent(ctx, db, scope, res.Event.ID)
		if err != nil || ev.ID != res.Event.ID || ev.Matched != 3 || ev.EventType != "campaign.created" {
			t.Fatalf("GetEvent = %+v, %v", ev, err)
		}
		for name, s := range map[string]model.WebhookScope{
			"another account": {AccountID: other.ID, Variant: model.VariantA},
			"another variant": {AccountID: acc.ID, Variant: model.VariantB},
		} {
			if _, err := model.GetEvent(ctx, db, s, res.Event.ID); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("%s: GetEvent err = %v, want ErrNotFound", name, err)
			}
		}
		if _, err := model.GetEvent(ctx, db, scope, lonely.Event.ID+1000); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("unknown id: GetEvent err = %v, want ErrNotFound", err)
		}

		deliveries, err := model.EventDeliveries(ctx, db, res.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, d := range deliveries {
			if d.EventID != res.Event.ID || d.WebhookID != hooks[i].ID {
				t.Fatalf("delivery %d = %+v, want the one to webhook %d", i, d, hooks[i].ID)
			}
			got = append(got, d.State)
		}
		if want := "[delivered exhausted canceled]"; fmt.Sprint(got) != want {
			t.Fatalf("states = %v, want %s", got, want)
		}
		if none, err := model.EventDeliveries(ctx, db, lonely.Event.ID); err != nil || none == nil || len(none) != 0 {
			t.Fatalf("deliveries of an event nobody subscribed to = %#v, %v; want an empty list", none, err)
		}

		counts, err := model.CountDeliveryStates(ctx, db, []int64{res.Event.ID, lonely.Event.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{model.DeliveryDelivered: 1, model.DeliveryExhausted: 1, model.DeliveryCanceled: 1}
		if len(counts) != 1 || fmt.Sprint(counts[res.Event.ID]) != fmt.Sprint(want) {
			t.Fatalf("counts = %v, want %v for event %d alone", counts, want, res.Event.ID)
		}
		if empty, err := model.CountDeliveryStates(ctx, db, nil); err != nil || len(empty) != 0 {
			t.Fatalf("counts of no events = %v, %v", empty, err)
		}
	})
}

// TestListEventsNewestFirst: newest first, pages walked with Before hold every event of the scope
// exactly once, in descending id order, with the type filter still applied.
func TestListEventsNewestFirst(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "newest@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		var want []int64
		for i := range 7 {
			want = append([]int64{publishAt(t, db, acc.ID, model.VariantB, "lead.captured", t0.Add(time.Duration(i)*time.Minute)).Event.ID}, want...)
			publishAt(t, db, acc.ID, model.VariantB, "presave.completed", t0)
			publishAt(t, db, acc.ID, model.VariantA, "campaign.created", t0)
		}
		var got []int64
		f := model.EventFilter{EventType: "lead.captured", NewestFirst: true, Limit: 3, After: 1 << 40}
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("paging does not end")
			}
			page, err := model.ListEvents(ctx, db, scope, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, eventIDs(page.Events)...)
			if !page.More {
				break
			}
			f.Before = page.Last
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("newest first = %v, want %v", got, want)
		}
	})
}
