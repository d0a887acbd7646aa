package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestWebhookOrdering (issue 43): ordering set at create is stored and shown, kept by a PUT that
// leaves it out, removed by one that sends null, set and removed by PATCH; a webhook without it
// shows ordering null. Each malformed value is 400 naming ordering.key (ordering when it is not an
// object) and changes nothing.
func TestWebhookOrdering(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		ordering := func(r response) string {
			t.Helper()
			r.expect(t, r.status, "")
			got, ok := r.data(t)["ordering"]
			if !ok {
				t.Fatalf("no ordering in %s", r.raw)
			}
			b, _ := json.Marshal(got)
			return string(b)
		}
		created := e.do(t, "POST", v.collection, auth, limitsBody("https://o.example.com/", v.eventType, `"ordering":{"key":"data.name"}`))
		created.expect(t, http.StatusCreated, "")
		if got := ordering(created); got != `{"key":"data.name"}` {
			t.Fatalf("created ordering = %s", got)
		}
		w := created.data(t)
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(w["id"]))
		if stored := loadWebhook(t, e, w["id"]); stored.OrderingKey == nil || *stored.OrderingKey != "data.name" {
			t.Fatalf("stored ordering key = %v", stored.OrderingKey)
		}
		if got := ordering(e.do(t, "GET", one, auth, "")); got != `{"key":"data.name"}` {
			t.Fatalf("GET ordering = %s", got)
		}
		plain := e.do(t, "POST", v.collection, auth, createBody("https://p.example.com/", v.eventType))
		plain.expect(t, http.StatusCreated, "")
		if got := ordering(plain); got != "null" {
			t.Fatalf("a webhook without ordering shows %s, want null", got)
		}

		steps := []struct {
			method, body, want string
		}{
			{"PUT", `{"url":"https://o2.example.com/"}`, `{"key":"data.name"}`},
			{"PUT", `{"url":"https://o2.example.com/","ordering":null}`, "null"},
			{"PATCH", `{"ordering":{"key":"data.items.0.sku"}}`, `{"key":"data.items.0.sku"}`},
			{"PATCH", `{"rateLimit":5}`, `{"key":"data.items.0.sku"}`},
			{"PATCH", `{"ordering":null}`, "null"},
			{"PUT", `{"url":"https://o3.example.com/","ordering":{"key":"data.id"}}`, `{"key":"data.id"}`},
		}
		for _, s := range steps {
			r := e.do(t, s.method, one, auth, s.body)
			r.expect(t, http.StatusOK, "")
			if got := ordering(r); got != s.want {
				t.Fatalf("%s %s: ordering %s, want %s", s.method, s.body, got, s.want)
			}
			stored := loadWebhook(t, e, w["id"])
			if (stored.OrderingKey == nil) != (s.want == "null") {
				t.Fatalf("%s %s: stored ordering key %v, want %s", s.method, s.body, stored.OrderingKey, s.want)
			}
		}

		for _, c := range []struct{ value, field string }{
			{`"data.id"`, "ordering"},
			{`[1]`, "ordering"},
			{`42`, "ordering"},
			{`{}`, "ordering.key"},
			{`{"key":"data.id","extra":1}`, "ordering.key"},
			{`{"path":"data.id"}`, "ordering.key"},
			{`{"key":null}`, "ordering.key"},
			{`{"key":7}`, "ordering.key"},
			{`{"key":""}`, "ordering.key"},
			{`{"key":"data..id"}`, "ordering.key"},
			{`{"key":".data"}`, "ordering.key"},
			{`{"key":"data.id."}`, "ordering.key"},
			{`{"key":"data id"}`, "ordering.key"},
			{`{"key":"data[0]"}`, "ordering.key"},
			{`{"key":"` + strings.Repeat("a", model.MaxOrderingKeyLength+1) + `"}`, "ordering.key"},
		} {
			for _, req := range []struct{ method, path, body string }{
				{"POST", v.collection, limitsBody("https://bad.example.com/", v.eventType, `"ordering":`+c.value)},
				{"PUT", one, `{"url":"https://o4.example.com/","ordering":` + c.value + `}`},
				{"PATCH", one, `{"ordering":` + c.value + `}`},
			} {
				r := e.do(t, req.method, req.path, auth, req.body)
				r.expectError(t, v, http.StatusBadRequest, c.field)
				if r.body["code"] != "invalid_request" {
					t.Errorf("%s ordering %.40s: %s", req.method, c.value, r.raw)
				}
			}
		}
		if stored := loadWebhook(t, e, w["id"]); stored.URL != "https://o3.example.com/" || stored.OrderingKey == nil || *stored.OrderingKey != "data.id" {
			t.Fatalf("refused requests changed the webhook: %s %v", stored.URL, stored.OrderingKey)
		}
	})
}

// orderedHook registers a webhook ordered by data.name and publishes an event for each name, in
// order; it returns the webhook's path.
func orderedHook(t *testing.T, e *testEnv, v variantCase, auth func(*http.Request), names ...string) string {
	t.Helper()
	r := e.do(t, "POST", v.collection, auth, limitsBody("https://lanes.example.com/", v.eventType, `"ordering":{"key":"data.name"}`))
	r.expect(t, http.StatusCreated, "")
	hook := v.collection + "/" + jsonNumber(r.data(t)["id"])
	for _, name := range names {
		data := map[string]any{}
		for k, val := range validData[v.name].(map[string]any) {
			data[k] = val
		}
		data["name"] = name
		e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, data)).expect(t, http.StatusAccepted, "")
	}
	return hook
}

// laneDeliveries reads the ids of a lane's deliveries, by their number in it.
func laneDeliveries(t *testing.T, e *testEnv, laneID int64) []int64 {
	t.Helper()
	var ids []int64
	if err := e.db.NewSelect().Table("deliveries").Column("id").Where("lane_id = ?", laneID).OrderExpr("lane_seq ASC").Scan(context.Background(), &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestLanes (issue 43): an ordered webhook's lanes, from the events intake gave it (no dispatcher
// runs: each delivery stays pending, the head of its lane). The list shows each lane with a head,
// by id, paged; ?blocked=true those whose head is exhausted; one lane reads alone; a lane with no
// head is 409 to retry and skip; another account's webhook, and another webhook's lane, are 404;
// bad ids and parameters are 400 naming them.
func TestLanes(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook := orderedHook(t, e, v, auth, "k1", "k2", "k1", "k3")
		r := e.do(t, "GET", hook+"/lanes", auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		lanes := r.list(t)
		if len(lanes) != 3 {
			t.Fatalf("lanes = %s, want 3", r.raw)
		}
		first := lanes[0].(map[string]any)
		head, _ := first["head"].(map[string]any)
		if first["key"] != "k1" || first["lastSequence"] != 2.0 || first["doneSequence"] != 0.0 || first["blocked"] != false ||
			first["waiting"] != 1.0 || head == nil || head["sequence"] != 1.0 || head["status"] != model.DeliveryPending || head["attempts"] != 0.0 {
			t.Fatalf("lane k1 = %v", first)
		}
		k1 := int64(first["id"].(float64))
		ids := laneDeliveries(t, e, k1)
		if len(ids) != 2 || head["deliveryId"] != float64(ids[0]) {
			t.Fatalf("lane k1's head %v, its deliveries %v", head, ids)
		}
		for i, want := range []string{"k1", "k2", "k3"} {
			if got := lanes[i].(map[string]any)["key"]; got != want {
				t.Fatalf("lane %d key %v, want %s: %s", i, got, want, r.raw)
			}
		}

		// Pages of one, by id.
		page := e.do(t, "GET", hook+"/lanes?limit=1", auth, "")
		page.expect(t, http.StatusOK, "")
		next, _, ok := strings.Cut(strings.TrimPrefix(page.header.Get("Link"), "<"), ">")
		if len(page.list(t)) != 1 || !ok {
			t.Fatalf("first page %s, Link %q", page.raw, page.header.Get("Link"))
		}
		if got := e.do(t, "GET", next, auth, "").list(t); len(got) != 1 || got[0].(map[string]any)["key"] != "k2" {
			t.Fatalf("second page = %v", got)
		}

		// Blocked: k2's head ran out of its schedule.
		k2 := int64(lanes[1].(map[string]any)["id"].(float64))
		if r := e.do(t, "GET", hook+"/lanes?blocked=true", auth, ""); len(r.list(t)) != 0 {
			t.Fatalf("blocked lanes before any exhausted head: %s", r.raw)
		}
		setDeliveryState(t, e, laneDeliveries(t, e, k2)[0], model.DeliveryExhausted)
		blocked := e.do(t, "GET", hook+"/lanes?blocked=true", auth, "")
		if got := blocked.list(t); len(got) != 1 || got[0].(map[string]any)["id"] != float64(k2) || got[0].(map[string]any)["blocked"] != true {
			t.Fatalf("blocked lanes = %s, want lane %d", blocked.raw, k2)
		}
		if got := e.do(t, "GET", hook+"/lanes?blocked=false", auth, "").list(t); len(got) != 3 {
			t.Fatalf("blocked=false lists %d lanes, want 3", len(got))
		}

		// One lane; then k3's only delivery delivered: the lane has no head, is left out of the
		// list, and has nothing to retry or skip.
		one := e.do(t, "GET", fmt.Sprintf("%s/lanes/%d", hook, k2), auth, "")
		one.expect(t, http.StatusOK, "")
		v.okEnvelope(t, one)
		if d := one.data(t); d["blocked"] != true || d["key"] != "k2" {
			t.Fatalf("lane k2 = %s", one.raw)
		}
		k3 := int64(lanes[2].(map[string]any)["id"].(float64))
		setDeliveryState(t, e, laneDeliveries(t, e, k3)[0], model.DeliveryDelivered)
		idle := e.do(t, "GET", fmt.Sprintf("%s/lanes/%d", hook, k3), auth, "")
		idle.expect(t, http.StatusOK, "")
		if d := idle.data(t); d["head"] != nil || d["waiting"] != 0.0 || d["blocked"] != false {
			t.Fatalf("idle lane = %s", idle.raw)
		}
		if got := e.do(t, "GET", hook+"/lanes", auth, "").list(t); len(got) != 2 {
			t.Fatalf("lanes after k3 was delivered: %d, want 2", len(got))
		}
		for _, op := range []string{"retry", "skip"} {
			r := e.do(t, "POST", fmt.Sprintf("%s/lanes/%d/%s", hook, k3, op), auth, "")
			r.expectError(t, v, http.StatusConflict, "")
			if r.body["code"] != "conflict" || !strings.Contains(r.body["message"].(string), "no delivery at its head") {
				t.Fatalf("%s of an idle lane: %s", op, r.raw)
			}
		}

		// Another account sees neither the webhook nor its lanes; another webhook's lane is not
		// this one's.
		stranger := v.auth(newKey(t, e.db))
		for _, req := range []struct{ method, path string }{
			{"GET", hook + "/lanes"},
			{"GET", fmt.Sprintf("%s/lanes/%d", hook, k1)},
			{"POST", fmt.Sprintf("%s/lanes/%d/retry", hook, k1)},
			{"POST", fmt.Sprintf("%s/lanes/%d/skip", hook, k1)},
		} {
			r := e.do(t, req.method, req.path, stranger, "")
			r.expectError(t, v, http.StatusNotFound, "")
			if msg := r.body["message"]; msg != "webhook not found" {
				t.Fatalf("%s %s by another account: %s", req.method, req.path, r.raw)
			}
		}
		strangersHook := orderedHook(t, e, v, stranger, "k1")
		for _, req := range []struct{ method, path string }{
			{"GET", fmt.Sprintf("%s/lanes/%d", strangersHook, k1)},
			{"POST", fmt.Sprintf("%s/lanes/%d/retry", strangersHook, k1)},
			{"POST", fmt.Sprintf("%s/lanes/%d/skip", strangersHook, k1)},
		} {
			r := e.do(t, req.method, req.path, stranger, "")
			r.expectError(t, v, http.StatusNotFound, "")
			if msg := r.body["message"]; msg != "lane not found" {
				t.Fatalf("%s %s, another webhook's lane: %s", req.method, req.path, r.raw)
			}
		}

		// Ids and parameters.
		for _, c := range []struct{ method, path, field string }{
			{"GET", hook + "/lanes/x", "laneId"},
			{"GET", hook + "/lanes/0", "laneId"},
			{"GET", hook + "/lanes/01", "laneId"},
			{"POST", hook + "/lanes/-1/skip", "laneId"},
			{"GET", hook + "/lanes?blocked=yes", "blocked"},
			{"GET", hook + "/lanes?after=x", "after"},
			{"GET", hook + "/lanes?limit=x", "limit"},
			{"GET", v.collection + "/x/lanes", "id"},
		} {
			e.do(t, c.method, c.path, auth, "").expectError(t, v, http.StatusBadRequest, c.field)
		}
		e.do(t, "GET", hook+"/lanes?limit=0", auth, "").expectError(t, v, http.StatusUnprocessableEntity, "limit")
		e.do(t, "POST", fmt.Sprintf("%s/lanes/%d/skip", hook, k1), auth, `{"x":1}`).expectError(t, v, http.StatusBadRequest, "x")

		// Without Temporal, retrying or skipping a head changes nothing and is 503.
		for _, op := range []string{"retry", "skip"} {
			e.do(t, "POST", fmt.Sprintf("%s/lanes/%d/%s", hook, k2, op), auth, "").expectError(t, v, http.StatusServiceUnavailable, "")
		}
		if got := deliveryState(t, e, laneDeliveries(t, e, k2)[0]); got != model.DeliveryExhausted {
			t.Fatalf("k2's head is %s after refused requests, want exhausted", got)
		}

		// An event whose body lacks the key goes to the lane of no key, shown as null.
		keyless := e.do(t, "POST", v.collection, auth, limitsBody("https://keyless.example.com/", v.eventType, `"ordering":{"key":"data.nope"}`))
		keyless.expect(t, http.StatusCreated, "")
		e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name])).expect(t, http.StatusAccepted, "")
		nokey := e.do(t, "GET", v.collection+"/"+jsonNumber(keyless.data(t)["id"])+"/lanes", auth, "")
		if got := nokey.list(t); len(got) != 1 || got[0].(map[string]any)["key"] != nil {
			t.Fatalf("lanes of a webhook whose key no body holds: %s", nokey.raw)
		}
		if !strings.Contains(string(nokey.raw), `"key":null`) {
			t.Fatalf("the lane of no key does not show key null: %s", nokey.raw)
		}

		// A webhook without ordering has no lanes.
		plain, _ := hookWithDelivery(t, e, v, auth)
		if r := e.do(t, "GET", plain+"/lanes", auth, ""); r.status != http.StatusOK || len(r.list(t)) != 0 {
			t.Fatalf("lanes of an unordered webhook: %s", r.raw)
		}
	})
}
