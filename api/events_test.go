package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/model"
)

func eventsPath(v variantCase) string {
	return strings.TrimSuffix(v.collection, "/webhooks") + "/events"
}

func eventBody(v variantCase, eventType string, data any) string {
	field := "eventType"
	if v.name == "B" {
		field = "event"
	}
	b, _ := json.Marshal(map[string]any{field: eventType, "data": data})
	return string(b)
}

var validData = map[string]any{
	"A": map[string]any{"id": 1, "name": "C", "platform": "meta", "status": "active", "startDate": "2026-01-01T00:00:00.000Z", "endDate": "2026-02-01T00:00:00.000Z", "budget": 10},
	"B": map[string]any{"websiteId": 1, "brandId": 2, "collectDataId": "c", "email": "a@example.com", "phone": "+4915112345678", "name": "N",
		"customFields": map[string]any{}, "source": map[string]any{"referrer": "https://x.example.com/", "userAgent": "UA", "ipAddress": "198.51.100.7", "country": "DE"}},
}

// TestPublishEvent: intake stores the event with one delivery per subscribed webhook and answers
// 202 with the id and the number matched; validation errors name the field.
func TestPublishEvent(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).expect(t, 201, "")
		data := validData[v.name]
		r := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, data))
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		if r.data(t)["matched"] != float64(1) {
			t.Fatalf("matched = %v: %s", r.data(t)["matched"], r.raw)
		}
		var ev model.Event
		if err := e.db.NewSelect().Model(&ev).Where("id = ?", r.data(t)["id"]).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ev.EventType != v.eventType || ev.Matched != 1 {
			t.Fatalf("stored event %+v", ev)
		}

		bad := map[string]any{}
		for k, val := range data.(map[string]any) {
			bad[k] = val
		}
		firstField := map[string]string{"A": "budget", "B": "phone"}[v.name]
		bad[firstField] = map[string]string{"A": "ten", "B": "0151 1234"}[v.name]
		cases := []struct {
			name, body  string
			status      int
			code, field string
		}{
			{"malformed", `{"data":`, 400, "invalid_request", ""},
			{"unknown event", eventBody(v, "campaign.exploded", data), 422, "validation_failed", map[string]string{"A": "eventType", "B": "event"}[v.name]},
			{"test event not publishable", eventBody(v, "webhook.test", map[string]any{"message": "x", "webhookId": 1}), 422, "validation_failed", ""},
			{"missing data", eventBody(v, v.eventType, nil), 422, "validation_failed", "data"},
			{"wrong data field", eventBody(v, v.eventType, bad), 422, "validation_failed", "data." + firstField},
			{"extra data field", eventBody(v, v.eventType, mergeMap(data, "extra", 1)), 422, "validation_failed", "data.extra"},
			{"duplicate key", strings.Replace(eventBody(v, v.eventType, data), `"data":{`, `"data":{"x":1,"x":2,`, 1), 400, "invalid_request", "data.x"},
			{"too large", eventBody(v, v.eventType, mergeMap(data, "pad", strings.Repeat("x", 300<<10))), 413, "payload_too_large", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "POST", eventsPath(v), auth, tc.body)
				r.expect(t, tc.status, tc.code)
				r.expectError(t, v, tc.status, tc.field)
			})
		}
		// The 413 names the limit of the route: 256 KiB for events, 64 KiB for management calls.
		big := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, mergeMap(data, "pad", strings.Repeat("x", 300<<10))))
		if msg, _ := big.body["message"].(string); !strings.Contains(msg, "256 KiB") {
			t.Errorf("413 on events says %q, want the 256 KiB limit", msg)
		}
		small := e.do(t, "POST", v.collection, auth, `{"url":"https://x.example.com/`+strings.Repeat("a", 70<<10)+`","eventType":"`+v.eventType+`"}`)
		if msg, _ := small.body["message"].(string); small.status != 413 || !strings.Contains(msg, "64 KiB") {
			t.Errorf("413 on webhooks: %d %q, want the 64 KiB limit", small.status, msg)
		}
		n, err := e.db.NewSelect().Model((*model.Event)(nil)).Where("account_id = ?", ev.AccountID).Where("event_type <> ?", model.EventTest).Count(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("refused events were stored: %d, %v", n, err)
		}
	})
}

// TestIdempotencyKeyHeader: same key and body, one event; same key, other body, 409.
func TestIdempotencyKeyHeader(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		withKey := func(k string) func(*http.Request) {
			return func(r *http.Request) { auth(r); r.Header.Set("Idempotency-Key", k) }
		}
		body := eventBody(v, v.eventType, validData[v.name])
		first := e.do(t, "POST", eventsPath(v), withKey("k-1"), body)
		first.expect(t, 202, "")
		second := e.do(t, "POST", eventsPath(v), withKey("k-1"), body)
		second.expect(t, 202, "")
		if second.data(t)["id"] != first.data(t)["id"] || second.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay = %s %v", second.raw, second.header)
		}
		other := eventBody(v, v.eventType, mergeMap(validData[v.name], map[string]string{"A": "budget", "B": "name"}[v.name], map[string]any{"A": 99, "B": "Other"}[v.name]))
		conflict := e.do(t, "POST", eventsPath(v), withKey("k-1"), other)
		conflict.expect(t, http.StatusConflict, "conflict")
		v.errEnvelope(t, conflict)
		e.do(t, "POST", eventsPath(v), withKey(strings.Repeat("k", 300)), body).expect(t, 400, "invalid_request")
	})
}

// TestIdempotencyKeyConcurrent: twenty identical requests with one Idempotency-Key at once all get
// 202 with the same event: one stores it with its deliveries, nineteen are replays (issue 8: on
// PostgreSQL the losers used to fail on the unique index with 500).
func TestIdempotencyKeyConcurrent(t *testing.T) {
	const n = 20
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).expect(t, 201, "")
		body := eventBody(v, v.eventType, validData[v.name])
		start := make(chan struct{})
		recs := make([]*httptest.ResponseRecorder, n)
		var wg sync.WaitGroup
		for i := range recs {
			req := httptest.NewRequest("POST", eventsPath(v), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "race-"+v.name)
			auth(req)
			recs[i] = httptest.NewRecorder()
			wg.Go(func() {
				<-start
				e.srv.ServeHTTP(recs[i], req)
			})
		}
		close(start)
		wg.Wait()

		replayed, ids := 0, map[float64]bool{}
		for _, rec := range recs {
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status = %d, want 202: %s", rec.Code, rec.Body)
			}
			var r struct {
				Data struct {
					ID float64 `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			ids[r.Data.ID] = true
			if rec.Header().Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		}
		if len(ids) != 1 || replayed != n-1 {
			t.Fatalf("event ids %v, %d replayed; want one id and %d replayed", ids, replayed, n-1)
		}
		ctx := context.Background()
		var events []model.Event
		if err := e.db.NewSelect().Model(&events).Where("idempotency_key = ?", "race-"+v.name).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || !ids[float64(events[0].ID)] {
			t.Fatalf("stored events with the key: %+v, answered ids %v", events, ids)
		}
		deliveries, err := e.db.NewSelect().Model((*model.Delivery)(nil)).Where("event_id = ?", events[0].ID).Count(ctx)
		if err != nil || deliveries != 1 || events[0].Matched != 1 {
			t.Fatalf("deliveries of the event = %d (matched %d), %v; want 1", deliveries, events[0].Matched, err)
		}
	})
}

// TestDeliveriesAndRetryEndpoints: the delivery list shows a webhook's deliveries; another
// account's webhook is 404 for both.
func TestDeliveriesAndRetryEndpoints(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		id := e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"]
		e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name])).expect(t, 202, "")
		list := e.do(t, "GET", fmt.Sprintf("%s/%s/deliveries", v.collection, jsonNumber(id)), auth, "")
		list.expect(t, 200, "")
		want := map[string]int{"A": 1, "B": 2}[v.name] // B also has its test event
		if got := len(list.list(t)); got != want {
			t.Fatalf("deliveries = %d, want %d: %s", got, want, list.raw)
		}
		intruder := v.auth(newKey(t, e.db))
		e.do(t, "GET", fmt.Sprintf("%s/%s/deliveries", v.collection, jsonNumber(id)), intruder, "").expect(t, 404, "not_found")
		e.do(t, "POST", fmt.Sprintf("%s/%s/retry", v.collection, jsonNumber(id)), intruder, "").expect(t, 404, "not_found")
	})
}

func mergeMap(m any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range m.(map[string]any) {
		out[key] = val
	}
	out[k] = v
	return out
}

// TestEventTypesCatalog: GET <prefix>/event-types lists the variant's subscribable types in its
// envelope, each with a description and an example that the intake accepts as it is; without a key
// it is 401 like every other call.
func TestEventTypesCatalog(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		path := strings.TrimSuffix(v.collection, "/webhooks") + "/event-types"
		r := e.do(t, "GET", path, auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		var types []string
		for _, item := range r.list(t) {
			et := item.(map[string]any)
			name := et["type"].(string)
			types = append(types, name)
			if et["description"] == "" {
				t.Errorf("%s: empty description", name)
			}
			pub := e.do(t, "POST", eventsPath(v), auth, eventBody(v, name, et["example"]))
			if pub.status != http.StatusAccepted {
				t.Errorf("publishing the catalog's example of %s: %d %s", name, pub.status, pub.raw)
			}
		}
		want := map[string]model.Variant{"A": model.VariantA, "B": model.VariantB}[v.name].EventTypes()
		if !slices.Equal(types, want) {
			t.Errorf("catalog lists %v, want %v", types, want)
		}
		e.do(t, "GET", path, nil, "").expectError(t, v, http.StatusUnauthorized, "")
	})
}
