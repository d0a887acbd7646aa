package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/model"
)

// accountLogFixture: two webhooks of one account with three events each (six deliveries), and
// another account's webhook with one; the first delivery exhausted after a 503, the second
// delivered after a 200, the others not attempted.
type accountLogFixture struct {
	auth, otherAuth func(*http.Request)
	hooks           []int64 // the account's two webhooks
	ids             []int64 // the account's deliveries, in id order
	prefix          string
}

func newAccountLogFixture(t *testing.T, e *testEnv, v variantCase) *accountLogFixture {
	t.Helper()
	ctx := context.Background()
	f := &accountLogFixture{auth: v.auth(newKey(t, e.db)), otherAuth: v.auth(newKey(t, e.db)), prefix: strings.TrimSuffix(v.collection, "/webhooks")}
	for range 2 {
		id := e.do(t, "POST", v.collection, f.auth, createBody("https://r.example.com/hook", v.eventType)).data(t)["id"].(float64)
		f.hooks = append(f.hooks, int64(id))
	}
	e.do(t, "POST", v.collection, f.otherAuth, createBody("https://r.example.com/hook", v.eventType)).expect(t, http.StatusCreated, "")
	for range 3 {
		e.do(t, "POST", eventsPath(v), f.auth, eventBody(v, v.eventType, validData[v.name])).expect(t, http.StatusAccepted, "")
	}
	e.do(t, "POST", eventsPath(v), f.otherAuth, eventBody(v, v.eventType, validData[v.name])).expect(t, http.StatusAccepted, "")
	// Variant B's test events after registration: not this fixture's.
	if _, err := e.db.NewDelete().Model((*model.Delivery)(nil)).Where("webhook_id IN (?)", bun.List(f.hooks)).
		Where("event_id IN (SELECT id FROM events WHERE event_type = ?)", model.EventTest).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var ds []model.Delivery
	if err := e.db.NewSelect().Model(&ds).Where("webhook_id IN (?)", bun.List(f.hooks)).Order("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		f.ids = append(f.ids, d.ID)
	}
	if len(f.ids) != 6 {
		t.Fatalf("the account has %d deliveries, want 6", len(f.ids))
	}
	for i, status := range []int{503, 200} {
		code := status
		a := &model.Attempt{DeliveryID: f.ids[i], Attempt: 1, URL: "https://r.example.com/hook", StartedAt: model.Now(), StatusCode: &code}
		if _, err := e.db.NewInsert().Model(a).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.NewUpdate().Model((*model.Delivery)(nil)).Set("attempts = 1").Where("id = ?", f.ids[i]).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	setDeliveryState(t, e, f.ids[0], model.DeliveryExhausted)
	setDeliveryState(t, e, f.ids[1], model.DeliveryDelivered)
	return f
}

// TestAccountDeliveries: GET <prefix>/deliveries lists the account's deliveries across its
// webhooks, newest first, each with its webhook; every filter keeps what it names; the cursor walks
// every page once, its Link keeping the filters; another account's deliveries are never listed;
// every malformed parameter is refused naming it.
func TestAccountDeliveries(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		f := newAccountLogFixture(t, e, v)
		path := f.prefix + "/deliveries"
		newest := slices.Clone(f.ids)
		slices.Reverse(newest)

		r := e.do(t, "GET", path, f.auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		if got := listIDs(t, r); fmt.Sprint(got) != fmt.Sprint(newest) {
			t.Fatalf("ids = %v, want %v", got, newest)
		}
		for _, it := range r.list(t) {
			d := it.(map[string]any)
			if hook := int64(d["webhookId"].(float64)); !slices.Contains(f.hooks, hook) {
				t.Fatalf("delivery %v of webhook %d, not the account's %v", d["id"], hook, f.hooks)
			}
		}
		byHook := func(hook int64) []int64 {
			var ids []int64
			for _, it := range r.list(t) {
				if d := it.(map[string]any); int64(d["webhookId"].(float64)) == hook {
					ids = append(ids, int64(d["id"].(float64)))
				}
			}
			return ids
		}
		firstHook := byHook(f.hooks[0])
		if len(firstHook) != 3 {
			t.Fatalf("webhook %d has %v", f.hooks[0], firstHook)
		}
		for _, tc := range []struct {
			query string
			want  []int64
		}{
			{fmt.Sprintf("webhookId=%d", f.hooks[0]), firstHook},
			{fmt.Sprintf("webhookId=%d,%d", f.hooks[0], f.hooks[1]), newest},
			{"state=exhausted,delivered", []int64{f.ids[1], f.ids[0]}},
			{"state=pending", newest[:4]},
			{"statusClass=5xx", []int64{f.ids[0]}},
			{"statusClass=2xx,5xx", []int64{f.ids[1], f.ids[0]}},
			{"statusClass=none", newest[:4]},
			{"statusClass=timeout", []int64{}},
			{"eventType=" + v.eventType, newest},
			{"eventType=" + v.otherEventType(t), []int64{}},
			{"since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z", newest},
			{"until=2000-01-01T00:00:00Z", []int64{}},
			{"state=exhausted&statusClass=2xx", []int64{}},
		} {
			r := e.do(t, "GET", path+"?"+tc.query, f.auth, "")
			r.expect(t, http.StatusOK, "")
			if got := listIDs(t, r); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("%s: ids = %v, want %v", tc.query, got, tc.want)
			}
		}
		if got := followPages(t, e, f.auth, path+"?limit=4&state=pending,exhausted,delivered"); fmt.Sprint(got) != fmt.Sprint(newest) {
			t.Fatalf("pages read %v, want %v", got, newest)
		}
		if got := followPages(t, e, f.auth, path+"?limit=1&statusClass=none"); fmt.Sprint(got) != fmt.Sprint(newest[:4]) {
			t.Fatalf("pages read %v, want %v", got, newest[:4])
		}

		// The other account sees its own deliveries alone (in B, its test event's too), not the first account's by their webhook.
		other := e.do(t, "GET", path, f.otherAuth, "")
		other.expect(t, http.StatusOK, "")
		if got := listIDs(t, other); len(got) == 0 || slices.ContainsFunc(got, func(id int64) bool { return slices.Contains(f.ids, id) }) {
			t.Fatalf("the other account lists %v", got)
		}
		foreign := e.do(t, "GET", fmt.Sprintf("%s?webhookId=%d", path, f.hooks[0]), f.otherAuth, "")
		foreign.expect(t, http.StatusOK, "")
		if got := listIDs(t, foreign); len(got) != 0 {
			t.Fatalf("the other account reads the first one's webhook: %v", got)
		}

		for _, tc := range []struct {
			query  string
			status int
			field  string
		}{
			{"state=bogus", 400, "state"},
			{"state=pending,", 400, "state"},
			{"state=pending&state=exhausted", 400, "state"},
			{"statusClass=7xx", 400, "statusClass"},
			{"eventType=" + v.foreignEventType, 400, "eventType"},
			{"webhookId=abc", 400, "webhookId"},
			{"webhookId=0", 400, "webhookId"},
			{"since=yesterday", 400, "since"},
			{"until=2026-13-01T00:00:00Z", 400, "until"},
			{"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z", 422, "until"},
			{"before=0", 400, "before"},
			{"limit=0", 422, "limit"},
			{"statusClass=" + strings.Repeat("none,", 100) + "none", 422, "statusClass"},
		} {
			r := e.do(t, "GET", path+"?"+tc.query, f.auth, "")
			r.expectError(t, v, tc.status, tc.field)
		}
	})
}
