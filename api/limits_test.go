package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// limits reads a webhook's rateLimit and maxInFlight as the API shows them, "-" for null, failing
// when either field is missing: they are always present.
func limits(t *testing.T, w map[string]any) [2]any {
	t.Helper()
	var out [2]any
	for i, f := range []string{"rateLimit", "maxInFlight"} {
		v, ok := w[f]
		if !ok {
			t.Fatalf("webhook without %s: %v", f, w)
		}
		if v == nil {
			out[i] = "-"
		} else {
			out[i] = v
		}
	}
	return out
}

func limitsBody(url, eventType, limits string) string {
	return strings.TrimSuffix(createBody(url, eventType), "}") + "," + limits + "}"
}

// TestWebhookLimits (issue 17): rateLimit and maxInFlight are set at create, shown by every read,
// kept by a PUT that leaves them out and cleared by one that sends null; PATCH changes them alone
// and leaves the status, the failure record and the disabled state as they were.
func TestWebhookLimits(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))

		plain := e.do(t, "POST", v.collection, auth, createBody("https://plain.example.com/", v.eventType))
		plain.expect(t, http.StatusCreated, "")
		if got := limits(t, plain.data(t)); got != [2]any{"-", "-"} {
			t.Fatalf("limits without any = %v, want null, null", got)
		}
		nulls := e.do(t, "POST", v.collection, auth, limitsBody("https://nulls.example.com/", v.eventType, `"rateLimit":null,"maxInFlight":null`))
		nulls.expect(t, http.StatusCreated, "")
		if got := limits(t, nulls.data(t)); got != [2]any{"-", "-"} {
			t.Fatalf("limits sent as null = %v, want null, null", got)
		}

		created := e.do(t, "POST", v.collection, auth, limitsBody("https://limited.example.com/", v.eventType, `"rateLimit":50,"maxInFlight":4`))
		created.expect(t, http.StatusCreated, "")
		v.okEnvelope(t, created)
		w := created.data(t)
		if got := limits(t, w); got != [2]any{50.0, 4.0} {
			t.Fatalf("created limits = %v, want 50, 4", got)
		}
		id := w["id"]
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(id))
		if stored := loadWebhook(t, e, id); stored.RateLimit == nil || *stored.RateLimit != 50 || stored.MaxInFlight == nil || *stored.MaxInFlight != 4 {
			t.Fatalf("stored limits = %v, %v", stored.RateLimit, stored.MaxInFlight)
		}
		if got := limits(t, e.do(t, "GET", one, auth, "").data(t)); got != [2]any{50.0, 4.0} {
			t.Fatalf("GET limits = %v", got)
		}
		listed := map[string][2]any{}
		for _, it := range e.do(t, "GET", v.collection, auth, "").list(t) {
			item := it.(map[string]any)
			listed[item["url"].(string)] = limits(t, item)
		}
		if want := map[string][2]any{
			"https://plain.example.com/": {"-", "-"}, "https://nulls.example.com/": {"-", "-"}, "https://limited.example.com/": {50.0, 4.0},
		}; fmt.Sprint(listed) != fmt.Sprint(want) {
			t.Fatalf("list limits = %v, want %v", listed, want)
		}

		// PUT keeps what it leaves out and clears what it sends as null.
		put := e.do(t, "PUT", one, auth, `{"url":"https://limited2.example.com/"}`)
		put.expect(t, http.StatusOK, "")
		if got := limits(t, put.data(t)); got != [2]any{50.0, 4.0} || put.data(t)["status"] != v.initialStatus {
			t.Fatalf("PUT without limits = %v", put.data(t))
		}
		put = e.do(t, "PUT", one, auth, `{"url":"https://limited3.example.com/","rateLimit":null,"maxInFlight":8}`)
		put.expect(t, http.StatusOK, "")
		v.okEnvelope(t, put)
		if got := limits(t, put.data(t)); got != [2]any{"-", 8.0} {
			t.Fatalf("PUT clearing rateLimit, setting maxInFlight = %v, want null, 8", got)
		}

		// A failing, disabled webhook with a failure record: PATCH must leave all of it.
		failing := map[string]string{"A": model.StatusFailed, "B": model.StatusFailing}[v.name]
		if _, err := e.db.NewUpdate().Table("webhooks").Set("status = ?", failing).Set("failure_count = 2").
			Where("id = ?", id).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.do(t, "POST", one+"/disable", auth, "").expect(t, http.StatusOK, "")
		before := e.do(t, "GET", one, auth, "").data(t)
		beforeRow := loadWebhook(t, e, id)
		if v.name == "A" && beforeRow.Status != model.StatusFailed {
			t.Fatalf("status before the PATCHes = %s, want failed", beforeRow.Status)
		}

		lastUpdated := before["updatedAt"]
		for _, step := range []struct {
			body string
			want [2]any
		}{
			{`{"rateLimit":20}`, [2]any{20.0, 8.0}},
			{`{"maxInFlight":null}`, [2]any{20.0, "-"}},
			{`{}`, [2]any{20.0, "-"}},
			{`{"rateLimit":10000,"maxInFlight":1000}`, [2]any{10000.0, 1000.0}},
			{`{"rateLimit":1,"maxInFlight":1}`, [2]any{1.0, 1.0}},
		} {
			e.clock.Advance(time.Millisecond) // updatedAt has millisecond resolution on the wire
			r := e.do(t, "PATCH", one, auth, step.body)
			r.expect(t, http.StatusOK, "")
			v.okEnvelope(t, r)
			got := r.data(t)
			if limits(t, got) != step.want {
				t.Fatalf("PATCH %s: limits = %v, want %v", step.body, limits(t, got), step.want)
			}
			if after := limits(t, e.do(t, "GET", one, auth, "").data(t)); after != step.want {
				t.Fatalf("PATCH %s: GET afterwards shows %v, want %v", step.body, after, step.want)
			}
			for f, want := range before {
				if f == "rateLimit" || f == "maxInFlight" || f == "updatedAt" {
					continue
				}
				if fmt.Sprint(got[f]) != fmt.Sprint(want) {
					t.Fatalf("PATCH %s changed %s from %v to %v", step.body, f, want, got[f])
				}
			}
			if v.name == "A" {
				if moved := got["updatedAt"] != lastUpdated; moved != (step.body != `{}`) {
					t.Fatalf("PATCH %s: updatedAt %v after %v; want it to move exactly when a limit is sent", step.body, got["updatedAt"], lastUpdated)
				}
				lastUpdated = got["updatedAt"]
			}
			row := loadWebhook(t, e, id)
			if row.Status != beforeRow.Status || !row.Disabled() || row.FailureCount != 2 || row.URL != beforeRow.URL || *row.DisabledReason != *beforeRow.DisabledReason {
				t.Fatalf("PATCH %s touched more than the limits: %+v", step.body, row)
			}
		}
		checkDisabled(t, v, e.do(t, "GET", one, auth, "").data(t), true, failing)
	}, withClock)
}

// TestWebhookLimitsRefused (issue 17): a limit of the wrong type is 400 and one out of range 422,
// naming the field, on create, PUT and PATCH alike; PATCH refuses url and eventType with 422 (they
// are PUT's), and another account's or the other variant's webhook is 404. Nothing refused changes
// anything.
func TestWebhookLimitsRefused(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		created := e.do(t, "POST", v.collection, auth, limitsBody("https://keep.example.com/", v.eventType, `"rateLimit":7,"maxInFlight":3`))
		created.expect(t, http.StatusCreated, "")
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(created.data(t)["id"]))

		bodies := map[string]func(limit string) string{
			"POST":  func(l string) string { return limitsBody("https://new.example.com/", v.eventType, l) },
			"PUT":   func(l string) string { return `{"url":"https://moved.example.com/",` + l + `}` },
			"PATCH": func(l string) string { return `{` + l + `}` },
		}
		paths := map[string]string{"POST": v.collection, "PUT": one, "PATCH": one}
		type refusal struct {
			limit  string
			status int
			field  string
		}
		var refusals []refusal
		for _, f := range []string{"rateLimit", "maxInFlight"} {
			for _, bad := range []string{`"5"`, `1.5`, `true`, `[1]`, `{}`} {
				refusals = append(refusals, refusal{`"` + f + `":` + bad, http.StatusBadRequest, f})
			}
			tooMany := map[string]string{"rateLimit": "10001", "maxInFlight": "1001"}[f]
			for _, bad := range []string{`0`, `-1`, tooMany, `1e30`} {
				refusals = append(refusals, refusal{`"` + f + `":` + bad, http.StatusUnprocessableEntity, f})
			}
		}
		for _, method := range []string{"POST", "PUT", "PATCH"} {
			for _, rf := range refusals {
				t.Run(method+" "+rf.limit, func(t *testing.T) {
					r := e.do(t, method, paths[method], auth, bodies[method](rf.limit))
					r.expectError(t, v, rf.status, rf.field)
					want := map[int]string{400: "invalid_request", 422: "validation_failed"}[rf.status]
					if r.body["code"] != want || !strings.Contains(r.body["message"].(string), rf.field) {
						t.Fatalf("%s: %s", rf.limit, r.raw)
					}
				})
			}
		}

		other := v.auth(newKey(t, e.db))
		otherVariant := variants[0]
		if v.name == "A" {
			otherVariant = variants[1]
		}
		for _, tc := range []struct {
			name, path string
			auth       func(*http.Request)
			body       string
			status     int
			field      string
		}{
			{"url", one, auth, `{"url":"https://moved.example.com/"}`, 422, "url"},
			{"url with limits", one, auth, `{"url":"https://moved.example.com/","rateLimit":5}`, 422, "url"},
			{"url null", one, auth, `{"url":null}`, 422, "url"},
			{"eventType", one, auth, `{"eventType":"` + v.eventType + `"}`, 422, "eventType"},
			{"unknown field", one, auth, `{"rateLimit":5,"burst":10}`, 400, "burst"},
			{"malformed JSON", one, auth, `{"rateLimit":`, 400, ""},
			{"not an object", one, auth, `[5]`, 400, ""},
			{"empty body", one, auth, "", 400, ""},
			{"non-numeric id", v.collection + "/abc", auth, `{"rateLimit":5}`, 400, "id"},
			{"no key", one, nil, `{"rateLimit":5}`, 401, ""},
			{"other variant's header", one, v.wrongAuth(key), `{"rateLimit":5}`, 401, ""},
			{"unknown id", v.collection + "/999999", auth, `{"rateLimit":5}`, 404, ""},
			{"unknown id, empty change", v.collection + "/999999", auth, `{}`, 404, ""},
			{"another account's webhook", one, other, `{"rateLimit":5}`, 404, ""},
			{"another account's webhook, empty change", one, other, `{}`, 404, ""},
			{"the other variant's webhook", fmt.Sprintf("%s/%s", otherVariant.collection, jsonNumber(created.data(t)["id"])),
				otherVariant.auth(key), `{"rateLimit":5}`, 404, ""},
		} {
			t.Run("PATCH "+tc.name, func(t *testing.T) {
				r := e.do(t, "PATCH", tc.path, tc.auth, tc.body)
				if strings.HasPrefix(tc.path, otherVariant.collection) {
					r.expectError(t, otherVariant, tc.status, tc.field)
				} else {
					r.expectError(t, v, tc.status, tc.field)
				}
				if tc.field == "url" && !strings.Contains(r.body["message"].(string), "PUT") {
					t.Fatalf("url refused without pointing to PUT: %s", r.raw)
				}
			})
		}

		r := e.do(t, "GET", one, auth, "")
		r.expect(t, http.StatusOK, "")
		if got := limits(t, r.data(t)); got != [2]any{7.0, 3.0} || r.data(t)["url"] != "https://keep.example.com/" {
			t.Fatalf("a refused request changed the webhook: %s", r.raw)
		}
		if n := len(e.do(t, "GET", v.collection, auth, "").list(t)); n != 1 {
			t.Fatalf("refused creates left %d webhooks, want 1", n)
		}
	})
}
