package model_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// sized is data of exactly n bytes (n even, at least 8), of two-byte characters: a budget counts
// bytes, not characters.
func sized(n int) string { return `{"s":"` + strings.Repeat("é", (n-8)/2) + `"}` }

// TestListEventsByteBudget: a page of events ends before the event that would take its data past
// MaxBytes, holds an event larger than the budget alone, and says where the next page starts.
func TestListEventsByteBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "budget@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		var ids []int64
		for _, n := range []int{400, 400, 400, 2000, 100} {
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: sized(n)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Event.ID)
		}
		for _, tc := range []struct {
			name       string
			after      int64
			limit, max int64
			want       []int64
			more       bool
		}{
			{"two fit, the third would pass", 0, 50, 1000, ids[:2], true},
			{"the budget exactly", 0, 50, 800, ids[:2], true},
			{"one byte less", 0, 50, 799, ids[:1], true},
			{"the next is larger than the budget", ids[1], 50, 1000, ids[2:3], true},
			{"alone when larger than the budget", ids[2], 50, 1000, ids[3:4], true},
			{"the last page", ids[3], 50, 1000, ids[4:], false},
			{"limit first", 0, 1, 1000, ids[:1], true},
			{"no budget", 0, 50, 0, ids, false},
			{"nothing after the last", ids[4], 50, 1000, []int64{}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				page, err := model.ListEvents(ctx, db, scope, model.EventFilter{After: tc.after, Limit: tc.limit, MaxBytes: tc.max})
				if err != nil {
					t.Fatal(err)
				}
				if got := eventIDs(page.Events); fmt.Sprint(got) != fmt.Sprint(tc.want) || page.More != tc.more {
					t.Fatalf("ids = %v, more = %v; want %v, %v", got, page.More, tc.want, tc.more)
				}
				if len(tc.want) > 0 && page.Last != tc.want[len(tc.want)-1] {
					t.Fatalf("last = %d, want %d", page.Last, tc.want[len(tc.want)-1])
				}
				for _, ev := range page.Events {
					if ev.Data == "" || ev.AccountID != acc.ID {
						t.Fatalf("event %d read without its data: %+v", ev.ID, ev)
					}
				}
			})
		}
	})
}

// TestListEventsHardBudget: with Budget, a page holds no event that would take its data past the
// budget, not even the first, and says that events are left; MaxBytes beside it still ends the page
// first when it is the smaller.
func TestListEventsHardBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "hard-budget@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		var ids []int64
		for _, n := range []int{400, 400, 2000, 100} {
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: sized(n)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Event.ID)
		}
		for _, tc := range []struct {
			name             string
			after            int64
			maxBytes, budget int64
			want             []int64
			more             bool
		}{
			{"two fit, the third would pass", 0, 0, 1000, ids[:2], true},
			{"the budget exactly", 0, 0, 800, ids[:2], true},
			{"not even the first", 0, 0, 399, []int64{}, true},
			{"a large one that fits", ids[1], 0, 2000, ids[2:3], true},
			{"a large one a byte over", ids[1], 0, 1999, []int64{}, true},
			{"MaxBytes the smaller", 0, 500, 1000, ids[:1], true},
			{"everything within it", 0, 0, 2900, ids, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				page, err := model.ListEvents(ctx, db, scope, model.EventFilter{After: tc.after, Limit: 50, MaxBytes: tc.maxBytes, Budget: tc.budget})
				if err != nil {
					t.Fatal(err)
				}
				if got := eventIDs(page.Events); fmt.Sprint(got) != fmt.Sprint(tc.want) || page.More != tc.more {
					t.Fatalf("ids = %v, more = %v; want %v, %v", got, page.More, tc.want, tc.more)
				}
			})
		}
	})
}

// TestListDeliveriesByteBudget: a page of a webhook's deliveries, newest first, ends before the
// delivery whose attempts' response bodies, request headers and errors would take it past MaxBytes,
// holds a larger one alone, and says where the next page starts.
func TestListDeliveriesByteBudget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "budget-log@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		// Newest first, the logs hold 300, 0, 900 and 300 bytes: each attempt a 100-byte body, 40
		// bytes of headers and a 10-byte error, or the body alone.
		var ids []int64
		for _, attempts := range []int{2, 6, 0, 2} {
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Deliveries[0].ID
			for i := range attempts {
				body, headers, msg := strings.Repeat("b", 100), `{"x":"`+strings.Repeat("h", 32)+`"}`, "refused!!!"
				a := &model.Attempt{DeliveryID: d, Attempt: i + 1, URL: w.URL, StartedAt: model.Now(), ResponseBody: &body}
				if attempts != 6 {
					a.RequestHeaders, a.Error = &headers, &msg
				}
				if _, err := db.NewInsert().Model(a).Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ids = append([]int64{d}, ids...)
		}
		for _, tc := range []struct {
			name       string
			before     int64
			limit, max int64
			want       []int64
			more       bool
		}{
			{"two fit, the third would pass", 0, 50, 500, ids[:2], true},
			{"alone when larger than the budget", ids[1], 50, 500, ids[2:3], true},
			{"the last page", ids[2], 50, 500, ids[3:], false},
			{"all within the budget", 0, 50, 1500, ids, false},
			{"no budget", 0, 50, 0, ids, false},
			{"limit first", 0, 1, 0, ids[:1], true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				page, err := model.ReadDeliveries(ctx, db, model.DeliveryQuery{WebhookID: w.ID, Before: tc.before, Limit: tc.limit, MaxBytes: tc.max, Order: model.NewestFirst, Include: model.IncludeAttempts})
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, v := range page.Views {
					got = append(got, v.ID)
					if want := map[int64]int{ids[0]: 2, ids[1]: 0, ids[2]: 6, ids[3]: 2}[v.ID]; len(v.Log) != want || v.EventType != "campaign.created" {
						t.Fatalf("delivery %d: %d attempts of %q, want %d", v.ID, len(v.Log), v.EventType, want)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) || page.More != tc.more || page.Last != tc.want[len(tc.want)-1] {
					t.Fatalf("ids = %v, more = %v, last = %d; want %v, %v", got, page.More, page.Last, tc.want, tc.more)
				}
			})
		}
	})
}
