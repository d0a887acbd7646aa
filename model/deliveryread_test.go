package model_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// readFixture is what the conformance cases of the one delivery read run over: two accounts, each
// with webhooks of both kinds of interest, deliveries in several states, times and sizes.
type readFixture struct {
	acc, other int64
	// hook and second are acc's variant A webhooks, gone acc's deleted one, foreign other's.
	hook, second, gone, foreign *model.Webhook
	// ids are hook's deliveries in id order: [0] exhausted and created 2 h ago with a 300-byte
	// attempt log, [1] pending and dispatched, [2] claimed an hour ago, [3] canceled with a
	// 900-byte log, [4] pending. secondIDs, goneIDs, foreignIDs: one each.
	ids                             []int64
	secondID, goneID, foreignID     int64
	events                          []int64
	twoHoursAgo, anHourAgo, justNow time.Time
}

func newReadFixture(t *testing.T, db *model.DB) *readFixture {
	t.Helper()
	ctx := context.Background()
	f := &readFixture{}
	_, acc, _ := model.CreateAPIKey(ctx, db, "reads@example.com", "")
	_, other, _ := model.CreateAPIKey(ctx, db, "other-reads@example.com", "")
	f.acc, f.other = acc.ID, other.ID
	f.hook = newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
	publish := func(accountID int64, only int64) int64 {
		t.Helper()
		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: accountID, Variant: model.VariantA, EventType: "campaign.created",
			Data: `{"n":1}`, OnlyWebhook: only})
		if err != nil || len(res.Deliveries) != 1 {
			t.Fatalf("publish: %+v, %v", res, err)
		}
		f.events = append(f.events, res.Event.ID)
		return res.Deliveries[0].ID
	}
	for range 5 {
		f.ids = append(f.ids, publish(acc.ID, f.hook.ID))
	}
	f.second = newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
	f.secondID = publish(acc.ID, f.second.ID)
	f.gone = newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
	f.goneID = publish(acc.ID, f.gone.ID)
	if err := model.DeleteWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}, f.gone.ID); err != nil {
		t.Fatal(err)
	}
	f.foreign = newWebhook(t, db, other.ID, model.VariantA, "campaign.created")
	f.foreignID = publish(other.ID, f.foreign.ID)

	now := model.Now()
	f.twoHoursAgo, f.anHourAgo, f.justNow = now.Add(-2*time.Hour), now.Add(-time.Hour), now.Add(-time.Second)
	set := func(id int64, column string, value any) {
		t.Helper()
		if _, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set(column+" = ?", value).Where("id = ?", id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	set(f.ids[0], "state", model.DeliveryExhausted)
	set(f.ids[0], "created_at", f.twoHoursAgo)
	if err := model.MarkDispatched(ctx, db, []int64{f.ids[1]}); err != nil {
		t.Fatal(err)
	}
	set(f.ids[2], "claimed_at", f.anHourAgo)
	set(f.ids[3], "state", model.DeliveryCanceled)
	// Attempt logs: 300 bytes for ids[0] (two attempts of 100 + 40 + 10), 900 for ids[3] (nine
	// bodies of 100).
	logs := map[int64]int{f.ids[0]: 2, f.ids[3]: 9}
	for id, n := range logs {
		for i := range n {
			body := strings.Repeat("b", 100)
			a := &model.Attempt{DeliveryID: id, Attempt: i + 1, URL: f.hook.URL, StartedAt: now, ResponseBody: &body}
			if n == 2 {
				headers, msg := `{"x":"`+strings.Repeat("h", 32)+`"}`, "refused!!!"
				a.RequestHeaders, a.Error = &headers, &msg
			}
			if _, err := db.NewInsert().Model(a).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

func viewIDs(views []model.DeliveryView) []int64 {
	ids := []int64{}
	for _, v := range views {
		ids = append(ids, v.ID)
	}
	return ids
}

// TestReadDeliveriesConformance runs the cases of the one delivery read (model.ReadDeliveries and
// CountDeliveries) on every backend: the scope keeps accounts apart, each filter selects what it
// says, the cursor walks every page once, the limit and MaxBytes bound a page, and Include fills in
// only what it names.
func TestReadDeliveriesConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		f := newReadFixture(t, db)
		scope := &model.WebhookScope{AccountID: f.acc, Variant: model.VariantA}
		otherScope := &model.WebhookScope{AccountID: f.other, Variant: model.VariantA}
		all := append(slices.Clone(f.ids), f.secondID, f.goneID, f.foreignID)
		for _, tc := range []struct {
			name string
			q    model.DeliveryQuery
			want []int64
		}{
			{"unscoped reads every account's, deleted webhooks' included", model.DeliveryQuery{}, all},
			{"a scope reads its account's live webhooks only", model.DeliveryQuery{Scope: scope}, append(slices.Clone(f.ids), f.secondID)},
			{"the other account's scope", model.DeliveryQuery{Scope: otherScope}, []int64{f.foreignID}},
			{"another account's delivery by id is not found", model.DeliveryQuery{Scope: scope, DeliveryID: f.foreignID}, []int64{}},
			{"nor by its webhook", model.DeliveryQuery{Scope: scope, WebhookID: f.foreign.ID}, []int64{}},
			{"a deleted webhook's delivery is out of scope", model.DeliveryQuery{Scope: scope, DeliveryID: f.goneID}, []int64{}},
			{"but the engine reads it", model.DeliveryQuery{DeliveryID: f.goneID}, []int64{f.goneID}},
			{"another variant's scope", model.DeliveryQuery{Scope: &model.WebhookScope{AccountID: f.acc, Variant: model.VariantB}}, []int64{}},
			{"the channels' scope", model.DeliveryQuery{Scope: &model.WebhookScope{AccountID: f.acc, Variant: model.VariantA, Channels: true}}, []int64{}},
			{"webhook", model.DeliveryQuery{WebhookID: f.second.ID}, []int64{f.secondID}},
			{"event", model.DeliveryQuery{EventID: f.events[2]}, []int64{f.ids[2]}},
			{"delivery", model.DeliveryQuery{Scope: scope, DeliveryID: f.ids[3]}, []int64{f.ids[3]}},
			{"states", model.DeliveryQuery{WebhookID: f.hook.ID, States: []string{model.DeliveryExhausted, model.DeliveryCanceled}}, []int64{f.ids[0], f.ids[3]}},
			{"since", model.DeliveryQuery{WebhookID: f.hook.ID, Since: f.anHourAgo}, f.ids[1:]},
			{"until", model.DeliveryQuery{WebhookID: f.hook.ID, Until: f.anHourAgo}, f.ids[:1]},
			{"since and until", model.DeliveryQuery{WebhookID: f.hook.ID, Since: f.twoHoursAgo.Add(-time.Minute), Until: f.anHourAgo}, f.ids[:1]},
			{"undispatched", model.DeliveryQuery{WebhookID: f.hook.ID, Undispatched: true}, []int64{f.ids[0], f.ids[2], f.ids[3], f.ids[4]}},
			{"claimed before", model.DeliveryQuery{ClaimedBefore: f.justNow}, []int64{f.ids[2]}},
			{"claimed before the claim", model.DeliveryQuery{ClaimedBefore: f.anHourAgo.Add(-time.Minute)}, []int64{}},
			{"after", model.DeliveryQuery{WebhookID: f.hook.ID, After: f.ids[2]}, f.ids[3:]},
			{"before", model.DeliveryQuery{WebhookID: f.hook.ID, Before: f.ids[2]}, f.ids[:2]},
			{"up to", model.DeliveryQuery{WebhookID: f.hook.ID, UpTo: f.ids[1]}, f.ids[:2]},
			{"after and up to", model.DeliveryQuery{WebhookID: f.hook.ID, After: f.ids[0], UpTo: f.ids[3]}, f.ids[1:4]},
			{"newest first", model.DeliveryQuery{WebhookID: f.hook.ID, Order: model.NewestFirst}, reversed(f.ids)},
			{"limit", model.DeliveryQuery{WebhookID: f.hook.ID, Limit: 2}, f.ids[:2]},
			{"limit, newest first", model.DeliveryQuery{WebhookID: f.hook.ID, Limit: 2, Order: model.NewestFirst}, reversed(f.ids)[:2]},
			{"claim order", model.DeliveryQuery{ClaimedBefore: f.justNow, Order: model.ClaimOrder}, []int64{f.ids[2]}},
			{"account turns", model.DeliveryQuery{Undispatched: true, Order: model.AccountTurns},
				[]int64{f.ids[0], f.foreignID, f.ids[2], f.ids[3], f.ids[4], f.secondID, f.goneID}},
			{"account turns, limited", model.DeliveryQuery{Undispatched: true, Order: model.AccountTurns, Limit: 2}, []int64{f.ids[0], f.foreignID}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				page, err := model.ReadDeliveries(ctx, db, tc.q)
				if err != nil {
					t.Fatal(err)
				}
				if got := viewIDs(page.Views); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("ids = %v, want %v", got, tc.want)
				}
				if tc.q.Limit == 0 {
					n, maxID, err := model.CountDeliveries(ctx, db, tc.q)
					if err != nil {
						t.Fatal(err)
					}
					if wantMax := slices.Max(append([]int64{0}, tc.want...)); n != len(tc.want) || maxID != wantMax {
						t.Fatalf("count = %d, max %d; want %d, %d", n, maxID, len(tc.want), wantMax)
					}
				}
				for _, v := range page.Views {
					if v.AccountID == 0 || v.Variant != model.VariantA || v.EventType != "campaign.created" || v.WebhookURL == "" {
						t.Fatalf("view %d lacks its event's or webhook's names: %+v", v.ID, v)
					}
					if scope := tc.q.Scope; scope != nil && v.AccountID != scope.AccountID {
						t.Fatalf("view %d of account %d read in account %d's scope", v.ID, v.AccountID, scope.AccountID)
					}
				}
			})
		}

		t.Run("status classes judge each delivery's last attempt", func(t *testing.T) {
			sc := newClassFixture(t, db)
			for _, tc := range []struct {
				classes []string
				want    []int64
			}{
				{[]string{model.Status2xx}, []int64{sc.ids["2xx"]}},
				{[]string{model.Status3xx}, []int64{sc.ids["3xx"]}},
				{[]string{model.Status4xx}, []int64{sc.ids["4xx"]}},
				// A 503 after a timeout is 5xx: only the last attempt counts.
				{[]string{model.Status5xx}, []int64{sc.ids["5xx"]}},
				{[]string{model.StatusTimeout}, []int64{sc.ids["timeout"]}},
				{[]string{model.StatusTLS}, []int64{sc.ids["tls"]}},
				{[]string{model.StatusNetwork}, sc.network},
				{[]string{model.StatusOther}, sc.other},
				{[]string{model.StatusNone}, []int64{sc.ids["none"]}},
				{[]string{model.Status4xx, model.Status5xx}, []int64{sc.ids["4xx"], sc.ids["5xx"]}},
				{[]string{model.StatusNone, model.StatusTimeout}, []int64{sc.ids["timeout"], sc.ids["none"]}},
			} {
				q := model.DeliveryQuery{Scope: sc.scope, StatusClasses: tc.classes}
				page, err := model.ReadDeliveries(ctx, db, q)
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if got := viewIDs(page.Views); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%v: ids = %v, want %v", tc.classes, got, want)
				}
				if n, _, err := model.CountDeliveries(ctx, db, q); err != nil || n != len(want) {
					t.Fatalf("%v: count = %d, %v; want %d", tc.classes, n, err, len(want))
				}
			}
			// Every delivery is in exactly one class.
			total := 0
			for _, c := range model.StatusClasses {
				n, _, err := model.CountDeliveries(ctx, db, model.DeliveryQuery{Scope: sc.scope, StatusClasses: []string{c}})
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			if all, _, _ := model.CountDeliveries(ctx, db, model.DeliveryQuery{Scope: sc.scope}); total != all {
				t.Fatalf("the classes hold %d deliveries, the scope %d", total, all)
			}
			// With the other filters: a webhook, event types, a list of webhooks.
			page, err := model.ReadDeliveries(ctx, db, model.DeliveryQuery{Scope: sc.scope, WebhookIDs: []int64{sc.hook.ID},
				EventTypes: []string{"campaign.created"}, StatusClasses: []string{model.Status2xx, model.StatusNone}})
			if err != nil || fmt.Sprint(viewIDs(page.Views)) != fmt.Sprint([]int64{sc.ids["2xx"], sc.ids["none"]}) {
				t.Fatalf("with webhooks and types: %v, %v", viewIDs(page.Views), err)
			}
			page, err = model.ReadDeliveries(ctx, db, model.DeliveryQuery{Scope: sc.scope, EventTypes: []string{"campaign.updated"}})
			if err != nil || len(page.Views) != 0 {
				t.Fatalf("another event type: %v, %v", viewIDs(page.Views), err)
			}
		})

		t.Run("the cursor walks every page once", func(t *testing.T) {
			for _, order := range []model.DeliveryOrder{model.OldestFirst, model.NewestFirst} {
				var got []int64
				q := model.DeliveryQuery{Scope: scope, Order: order, Limit: 2}
				for pages := 0; ; pages++ {
					if pages > 10 {
						t.Fatal("the cursor does not end")
					}
					page, err := model.ReadDeliveries(ctx, db, q)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, viewIDs(page.Views)...)
					if !page.More {
						break
					}
					if page.Last != page.Views[len(page.Views)-1].ID {
						t.Fatalf("last = %d, the page ends at %d", page.Last, page.Views[len(page.Views)-1].ID)
					}
					if order == model.NewestFirst {
						q.Before = page.Last
					} else {
						q.After = page.Last
					}
				}
				want := append(slices.Clone(f.ids), f.secondID)
				if order == model.NewestFirst {
					want = reversed(want)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("order %d: pages read %v, want %v", order, got, want)
				}
			}
		})

		t.Run("MaxBytes bounds a page by its attempt logs", func(t *testing.T) {
			// Newest first, the logs hold 0, 900, 0, 0 and 300 bytes.
			newest := reversed(f.ids)
			for _, tc := range []struct {
				name   string
				before int64
				max    int64
				want   []int64
				more   bool
			}{
				{"stops before the log that would pass", 0, 500, newest[:1], true},
				{"alone when larger than the budget", newest[0], 500, newest[1:2], true},
				{"fits the rest", newest[1], 500, newest[2:], false},
				{"all within the budget", 0, 1200, newest, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					page, err := model.ReadDeliveries(ctx, db, model.DeliveryQuery{Scope: scope, WebhookID: f.hook.ID, Before: tc.before,
						Order: model.NewestFirst, Limit: 50, MaxBytes: tc.max, Include: model.IncludeAttempts})
					if err != nil {
						t.Fatal(err)
					}
					if got := viewIDs(page.Views); fmt.Sprint(got) != fmt.Sprint(tc.want) || page.More != tc.more || page.Last != tc.want[len(tc.want)-1] {
						t.Fatalf("ids = %v, more = %v, last = %d; want %v, %v", got, page.More, page.Last, tc.want, tc.more)
					}
				})
			}
		})

		t.Run("include fills in only what it names", func(t *testing.T) {
			read := func(include model.DeliveryInclude) model.DeliveryView {
				t.Helper()
				page, err := model.ReadDeliveries(ctx, db, model.DeliveryQuery{Scope: scope, DeliveryID: f.ids[0], Include: include})
				if err != nil || len(page.Views) != 1 {
					t.Fatalf("read: %+v, %v", page, err)
				}
				return page.Views[0]
			}
			bare := read(0)
			if bare.Log != nil || bare.EventData != "" || !bare.EventOccurredAt.IsZero() {
				t.Fatalf("without include: log %v, data %q, occurred %v", bare.Log, bare.EventData, bare.EventOccurredAt)
			}
			withLog := read(model.IncludeAttempts)
			if len(withLog.Log) != 2 || withLog.Log[0].Attempt != 1 || withLog.Log[1].Attempt != 2 || withLog.EventData != "" {
				t.Fatalf("with the attempts: log %+v, data %q", withLog.Log, withLog.EventData)
			}
			withEvent := read(model.IncludeEvent)
			if withEvent.Log != nil || withEvent.EventData != `{"n":1}` || withEvent.EventOccurredAt.IsZero() || withEvent.EventVersion == 0 {
				t.Fatalf("with the event: log %v, data %q, occurred %v, version %d", withEvent.Log, withEvent.EventData, withEvent.EventOccurredAt, withEvent.EventVersion)
			}
			if ref := withEvent.Ref(); ref.DeliveryID != f.ids[0] || ref.AccountID != f.acc || ref.WebhookID != f.hook.ID ||
				ref.State != model.DeliveryExhausted || ref.WebhookURL != f.hook.URL {
				t.Fatalf("ref = %+v", ref)
			}
		})
	})
}

func reversed(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

// classFixture is an account whose deliveries each end in a different status class.
type classFixture struct {
	scope          *model.WebhookScope
	hook           *model.Webhook
	ids            map[string]int64
	network, other []int64
}

func newClassFixture(t *testing.T, db *model.DB) *classFixture {
	t.Helper()
	ctx := context.Background()
	_, acc, _ := model.CreateAPIKey(ctx, db, "classes@example.com", "")
	f := &classFixture{scope: &model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}, ids: map[string]int64{}}
	f.hook = newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
	code := func(n int) *int { return &n }
	class := func(s string) *string { return &s }
	type try struct {
		status *int
		class  *string
	}
	// Each delivery's attempts, the last one deciding.
	cases := []struct {
		name  string
		tries []try
	}{
		{"2xx", []try{{code(500), class("http_status")}, {code(204), nil}}},
		{"3xx", []try{{code(301), class("redirect")}}},
		{"4xx", []try{{code(410), class("http_status")}}},
		{"5xx", []try{{nil, class("timeout")}, {code(503), class("http_status")}}},
		{"timeout", []try{{code(500), class("http_status")}, {nil, class("timeout")}}},
		{"tls", []try{{nil, class("tls")}}},
		{"none", nil},
	}
	for _, c := range model.NetworkErrorClasses {
		cases = append(cases, struct {
			name  string
			tries []try
		}{"network:" + c, []try{{nil, class(c)}}})
	}
	for _, c := range []string{"auth_failed", "broker_refused", "broker_auth", "mail", "something_new"} {
		cases = append(cases, struct {
			name  string
			tries []try
		}{"other:" + c, []try{{nil, class(c)}}})
	}
	cases = append(cases, struct {
		name  string
		tries []try
	}{"other:101", []try{{code(101), nil}}})
	for _, c := range cases {
		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created",
			Data: `{"n":1}`, OnlyWebhook: f.hook.ID})
		if err != nil || len(res.Deliveries) != 1 {
			t.Fatalf("publish: %+v, %v", res, err)
		}
		id := res.Deliveries[0].ID
		for i, a := range c.tries {
			row := &model.Attempt{DeliveryID: id, Attempt: i + 1, URL: f.hook.URL, StartedAt: model.Now(), StatusCode: a.status, ErrorClass: a.class}
			if _, err := db.NewInsert().Model(row).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set("attempts = ?", len(c.tries)).Where("id = ?", id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(c.name, "network:"):
			f.network = append(f.network, id)
		case strings.HasPrefix(c.name, "other:"):
			f.other = append(f.other, id)
		default:
			f.ids[c.name] = id
		}
	}
	return f
}
