package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/sources"
)

// typeFields names the event type field of a variant's events, and the other variant's.
func typeFields(v variantCase) (field, other string) {
	if v.name == "B" {
		return "event", "eventType"
	}
	return "eventType", "event"
}

// listIDs returns the ids of a list response's items.
func listIDs(t *testing.T, r response) []int64 {
	t.Helper()
	ids := []int64{}
	for _, it := range r.list(t) {
		ids = append(ids, int64(it.(map[string]any)["id"].(float64)))
	}
	return ids
}

// followPages reads a list from path to its last page by its Link headers, checking each Link
// keeps the query of the first request; it returns the ids of every page in order.
func followPages(t *testing.T, e *testEnv, auth func(*http.Request), path string) []int64 {
	t.Helper()
	first, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		r := e.do(t, "GET", path, auth, "")
		r.expect(t, http.StatusOK, "")
		ids = append(ids, listIDs(t, r)...)
		path = ""
		if link := r.header.Get("Link"); link != "" {
			path = strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">")
			next, err := url.Parse(path)
			if err != nil {
				t.Fatal(err)
			}
			for k := range first.Query() {
				if k != "after" && next.Query().Get(k) != first.Query().Get(k) {
					t.Fatalf("Link %s drops %s=%s", link, k, first.Query().Get(k))
				}
			}
		}
	}
	return ids
}

// otherEventType is a type of the variant that no webhook of these tests subscribes to.
func (v variantCase) otherEventType(t *testing.T) string {
	t.Helper()
	return map[string]string{"A": "campaign.updated", "B": "presave.completed"}[v.name]
}

// example is the event type catalog's example of eventType's data, which intake accepts.
func (v variantCase) example(t *testing.T, eventType string) json.RawMessage {
	t.Helper()
	for _, info := range sources.EventCatalog(map[string]model.Variant{"A": model.VariantA, "B": model.VariantB}[v.name]) {
		if info.Type == eventType {
			return info.Example
		}
	}
	t.Fatalf("no %s in the catalog of variant %s", eventType, v.name)
	return nil
}

func sameJSON(t *testing.T, got, want any) bool {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	return string(g) == string(w)
}

// TestEventLog: the account's events of the variant, in id order, each with its type under the
// variant's name, its data as JSON, its time, the number matched and its deliveries counted by
// state; one event with every delivery and its state; the type and time filters, pagination with a
// Link that keeps them, and every malformed parameter refused naming it.
func TestEventLog(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		ctx := context.Background()
		auth := v.auth(newKey(t, e.db))
		typeField, otherField := typeFields(v)
		var hooks []int64
		for i := range 3 {
			r := e.do(t, "POST", v.collection, auth, createBody(fmt.Sprintf("https://log%d.example.com/", i), v.eventType))
			r.expect(t, http.StatusCreated, "")
			hooks = append(hooks, int64(r.data(t)["id"].(float64)))
		}
		var published []int64
		for range 3 {
			r := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name]))
			r.expect(t, http.StatusAccepted, "")
			published = append(published, int64(r.data(t)["id"].(float64)))
		}
		// The first event's deliveries move on: one delivered, one waiting for its third attempt;
		// the third webhook is deleted, which cancels its deliveries of every event.
		next := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
		for _, u := range []struct {
			hook     int64
			state    string
			attempts int
			lastErr  any
			next     any
		}{
			{hooks[0], model.DeliveryDelivered, 1, nil, nil},
			{hooks[1], model.DeliveryRetrying, 2, "receiver answered 503", next},
		} {
			if _, err := e.db.NewUpdate().Model((*model.Delivery)(nil)).
				Set("state = ?, attempts = ?, last_error = ?, next_attempt_at = ?", u.state, u.attempts, u.lastErr, u.next).
				Where("event_id = ?", published[0]).Where("webhook_id = ?", u.hook).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		e.do(t, "DELETE", fmt.Sprintf("%s/%d", v.collection, hooks[2]), auth, "").expect(t, http.StatusOK, "")
		// Each published event occurred an hour after the one before.
		base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		for i, id := range published {
			if _, err := e.db.NewUpdate().Model((*model.Event)(nil)).Set("occurred_at = ?", base.Add(time.Duration(i)*time.Hour)).
				Where("id = ?", id).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// Variant B registration sent each webhook a webhook.test event, before anything published.
		var tests []int64
		if v.name == "B" {
			r := e.do(t, "GET", eventsPath(v)+"?eventType=webhook.test", auth, "")
			r.expect(t, http.StatusOK, "")
			for i, it := range r.list(t) {
				ev := it.(map[string]any)
				if ev["event"] != model.EventTest || ev["data"].(map[string]any)["webhookId"] != float64(hooks[i]) || ev["matched"] != float64(1) {
					t.Fatalf("test event %d = %v", i, ev)
				}
				tests = append(tests, int64(ev["id"].(float64)))
			}
			if len(tests) != 3 {
				t.Fatalf("%d test events, want one per webhook: %s", len(tests), r.raw)
			}
		} else if n := len(e.do(t, "GET", eventsPath(v)+"?eventType=webhook.test", auth, "").list(t)); n != 0 {
			t.Fatalf("variant A lists %d test events, want none: no test was asked for", n)
		}

		list := e.do(t, "GET", eventsPath(v), auth, "")
		list.expect(t, http.StatusOK, "")
		v.okEnvelope(t, list)
		if got, want := listIDs(t, list), slices.Concat(tests, published); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("listed ids = %v, want %v", got, want)
		}
		if list.header.Get("Link") != "" {
			t.Fatalf("a single page carries Link %q", list.header.Get("Link"))
		}
		items := list.list(t)
		states := map[string]any{"pending": 0, "delivering": 0, "retrying": 1, "delivered": 1, "exhausted": 0, "canceled": 1}
		first := items[len(tests)].(map[string]any)
		if first[typeField] != v.eventType || first[otherField] != nil || first["occurredAt"] != "2026-03-01T10:00:00.000Z" ||
			first["matched"] != float64(3) || !sameJSON(t, first["data"], validData[v.name]) || !sameJSON(t, first["deliveryStates"], states) {
			t.Fatalf("listed event = %v", first)
		}
		if _, ok := first["deliveries"]; ok {
			t.Fatalf("a listed event carries its deliveries: %v", first)
		}
		later := items[len(tests)+1].(map[string]any)
		if want := map[string]any{"pending": 2, "delivering": 0, "retrying": 0, "delivered": 0, "exhausted": 0, "canceled": 1}; !sameJSON(t, later["deliveryStates"], want) {
			t.Fatalf("deliveryStates of event %v = %v, want %v", later["id"], later["deliveryStates"], want)
		}

		one := e.do(t, "GET", fmt.Sprintf("%s/%d", eventsPath(v), published[0]), auth, "")
		one.expect(t, http.StatusOK, "")
		v.okEnvelope(t, one)
		got := one.data(t)
		deliveries := got["deliveries"].([]any)
		delete(got, "deliveries")
		if !sameJSON(t, got, first) {
			t.Fatalf("read event = %v, want the listed %v with its deliveries", got, first)
		}
		want := []map[string]any{
			{"webhookId": hooks[0], "state": "delivered", "attempts": 1, "lastError": nil, "nextAttemptAt": nil},
			{"webhookId": hooks[1], "state": "retrying", "attempts": 2, "lastError": "receiver answered 503", "nextAttemptAt": "2026-03-01T10:05:00.000Z"},
			{"webhookId": hooks[2], "state": "canceled", "attempts": 0, "lastError": nil, "nextAttemptAt": nil},
		}
		if len(deliveries) != len(want) {
			t.Fatalf("deliveries = %v, want %d", deliveries, len(want))
		}
		for i, w := range want {
			d := deliveries[i].(map[string]any)
			for k, val := range w {
				if !sameJSON(t, d[k], val) {
					t.Fatalf("delivery %d %s = %v, want %v: %v", i, k, d[k], val, d)
				}
			}
			if _, ok := d["updatedAt"].(string); !ok || d["id"] == nil || d["createdAt"] == nil {
				t.Fatalf("delivery %d = %v", i, d)
			}
		}
		// An event nobody subscribed to has no deliveries: an empty list, not null.
		lonely := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.otherEventType(t), v.example(t, v.otherEventType(t))))
		lonely.expect(t, http.StatusAccepted, "")
		r := e.do(t, "GET", eventsPath(v)+"/"+jsonNumber(lonely.data(t)["id"]), auth, "")
		r.expect(t, http.StatusOK, "")
		if d, ok := r.data(t)["deliveries"].([]any); !ok || len(d) != 0 || r.data(t)["matched"] != float64(0) {
			t.Fatalf("event without subscribers = %s", r.raw)
		}

		typed := eventsPath(v) + "?eventType=" + v.eventType
		window := []struct {
			name, query string
			want        []int64
		}{
			{"type", "", published},
			{"since is inclusive", "&since=2026-03-01T11:00:00.000Z", published[1:]},
			{"until is exclusive", "&until=2026-03-01T11:00:00Z", published[:1]},
			{"since with an offset", "&since=" + url.QueryEscape("2026-03-01T13:00:00+02:00"), published[1:]},
			{"window", "&since=2026-03-01T10:00:00Z&until=2026-03-01T12:00:00Z", published[:2]},
			{"a microsecond later", "&since=2026-03-01T11:00:00.000001Z", published[2:]},
			{"nothing", "&until=2026-03-01T09:00:00Z", []int64{}},
		}
		for _, tc := range window {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "GET", typed+tc.query, auth, "")
				r.expect(t, http.StatusOK, "")
				if got := listIDs(t, r); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("ids = %v, want %v", got, tc.want)
				}
			})
		}

		if got, want := followPages(t, e, auth, eventsPath(v)+"?limit=2"), slices.Concat(tests, published, []int64{int64(lonely.data(t)["id"].(float64))}); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("paged ids = %v, want %v", got, want)
		}
		if got := followPages(t, e, auth, typed+"&since=2026-03-01T10:00:00Z&limit=1"); fmt.Sprint(got) != fmt.Sprint(published) {
			t.Fatalf("filtered pages = %v, want %v", got, published)
		}
		if got := listIDs(t, e.do(t, "GET", fmt.Sprintf("%s&after=%d", typed, published[0]), auth, "")); fmt.Sprint(got) != fmt.Sprint(published[1:]) {
			t.Fatalf("after %d = %v, want %v", published[0], got, published[1:])
		}

		refused := []struct {
			name, query string
			status      int
			field       string
		}{
			{"limit not a number", "?limit=ten", 400, "limit"},
			{"limit zero", "?limit=0", 422, "limit"},
			{"limit too large", "?limit=201", 422, "limit"},
			{"after not a number", "?after=x", 400, "after"},
			{"after negative", "?after=-1", 400, "after"},
			{"unknown type", "?eventType=campaign.exploded", 422, "eventType"},
			{"the other variant's type", "?eventType=" + v.foreignEventType, 422, "eventType"},
			{"since not a time", "?since=yesterday", 400, "since"},
			{"since a date only", "?since=2026-03-01", 400, "since"},
			{"until not a time", "?until=2026-13-01T00:00:00Z", 400, "until"},
			{"unencoded plus", "?since=2026-03-01T13:00:00+02:00", 400, "since"},
			{"since in year 0", "?since=0000-12-31T00:00:00Z", 422, "since"},
			{"until past year 9999", "?until=" + url.QueryEscape("9999-12-31T23:00:00-02:00"), 422, "until"},
			{"empty window", "?since=2026-03-01T10:00:00Z&until=2026-03-01T10:00:00Z", 422, "since"},
			{"reversed window", "?since=2026-03-01T11:00:00Z&until=2026-03-01T10:00:00Z", 422, "since"},
		}
		for _, tc := range refused {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "GET", eventsPath(v)+tc.query, auth, "")
				r.expectError(t, v, tc.status, tc.field)
				if msg, _ := r.body["message"].(string); tc.name == "unencoded plus" && !strings.Contains(msg, "%2B") {
					t.Fatalf("message %q does not say how to send the '+'", msg)
				}
				if code := map[int]string{400: "invalid_request", 422: "validation_failed"}[tc.status]; r.body["code"] != code {
					t.Fatalf("code = %v, want %s", r.body["code"], code)
				}
			})
		}
		for _, id := range []string{"x", "0", "-1", "1.5"} {
			e.do(t, "GET", eventsPath(v)+"/"+id, auth, "").expectError(t, v, http.StatusBadRequest, "id")
		}
		e.do(t, "GET", fmt.Sprintf("%s/%d", eventsPath(v), published[2]+1000), auth, "").expect(t, http.StatusNotFound, "not_found")

		for _, path := range []string{eventsPath(v), fmt.Sprintf("%s/%d", eventsPath(v), published[0])} {
			e.do(t, "GET", path, nil, "").expectError(t, v, http.StatusUnauthorized, "")
			e.do(t, "GET", path, v.wrongAuth(newKey(t, e.db)), "").expectError(t, v, http.StatusUnauthorized, "")
		}
	})
}

// TestEventLogTenancy: another account's event, and the same account's event of the other
// variant, are 404 by id and absent from the list.
func TestEventLogTenancy(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			owner, intruder := newKey(t, e.db), newKey(t, e.db)
			ids := map[string]string{}
			for _, v := range variants {
				r := e.do(t, "POST", eventsPath(v), v.auth(owner), eventBody(v, v.eventType, validData[v.name]))
				r.expect(t, http.StatusAccepted, "")
				ids[v.name] = jsonNumber(r.data(t)["id"])
			}
			for i, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					mine := eventsPath(v) + "/" + ids[v.name]
					theirs := eventsPath(v) + "/" + ids[variants[1-i].name]
					e.do(t, "GET", mine, v.auth(owner), "").expect(t, http.StatusOK, "")
					e.do(t, "GET", mine, v.auth(intruder), "").expectError(t, v, http.StatusNotFound, "")
					r := e.do(t, "GET", theirs, v.auth(owner), "")
					r.expectError(t, v, http.StatusNotFound, "")
					r.expect(t, http.StatusNotFound, "not_found")
					if got := listIDs(t, e.do(t, "GET", eventsPath(v), v.auth(intruder), "")); len(got) != 0 {
						t.Fatalf("another account lists %v", got)
					}
					if got := listIDs(t, e.do(t, "GET", eventsPath(v), v.auth(owner), "")); fmt.Sprint(got) != "["+ids[v.name]+"]" {
						t.Fatalf("owner lists %v, want only its variant %s event %s", got, v.name, ids[v.name])
					}
				})
			}
		})
	}
}
