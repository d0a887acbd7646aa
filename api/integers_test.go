package api_test

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model/dbtest"
)

// intField is one integer field of a request body, where a test can put a literal of its own.
type intField struct {
	name   string // as the error's field names it
	v      variantCase
	method string
	path   func() string
	body   string // %s is the literal
	// top is the largest value the field takes: a 422 for a value out of range names it.
	top string
	// value reads, from the answer to a request with the literal 100 in whatever spelling, the
	// value the field took.
	value func(t *testing.T, r response) float64
	// data: the field is in an event's data, where any wrong value, a wrong type included, is 422
	// (docs/api.md, "Events").
	data bool
}

// TestIntegerSpelling (issue 27): one rule for every integer field of every body, both variants.
// A JSON number whose value is an integer is that integer however it is written (1e2, 1E+2, 100.0,
// 10000e-2 are 100); a number that is not an integer (1.5, 1e-2) is a wrong type, 400 naming the
// field (422 in an event's data, as all its errors); a value out of the field's range, 1e400 and
// 9007199254740993 included, is 422 naming the field, and its range when it is over the top.
func TestIntegerSpelling(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	key := newKey(t, e.db)
	a, b := variants[0], variants[1]
	fixed := func(p string) func() string { return func() string { return p } }
	hook := map[string]string{}
	for _, v := range variants {
		hook[v.name] = v.collection + "/" + jsonNumber(e.do(t, "POST", v.collection, v.auth(key), createBody("https://r.example.com/", v.eventType)).data(t)["id"])
	}
	site := func() string {
		return "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", b.auth(key), fmt.Sprintf(`{"brandId":3,"slug":"s%d"}`, time.Now().UnixNano())).data(t)["id"])
	}
	field := func(name string) func(*testing.T, response) float64 {
		return func(t *testing.T, r response) float64 { return r.data(t)[name].(float64) }
	}
	ttl := func(t *testing.T, r response) float64 {
		at, err := time.Parse(time.RFC3339, r.data(t)["expiresAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return math.Round(time.Until(at).Seconds())
	}
	// event reads the published event's data, as GET <prefix>/events/<id> shows it.
	event := func(v variantCase, name string) func(*testing.T, response) float64 {
		return func(t *testing.T, r response) float64 {
			got := e.do(t, "GET", eventsPath(v)+"/"+jsonNumber(r.data(t)["id"]), v.auth(key), "")
			return got.data(t)["data"].(map[string]any)[name].(float64)
		}
	}
	limitFields := func(v variantCase, name, top string) []intField {
		return []intField{
			{name, v, "POST", fixed(v.collection), `{"url":"https://r.example.com/","eventType":"` + v.eventType + `","` + name + `":%s}`, top, field(name), false},
			{name, v, "PUT", fixed(hook[v.name]), `{"url":"https://r.example.com/","` + name + `":%s}`, top, field(name), false},
			{name, v, "PATCH", fixed(hook[v.name]), `{"` + name + `":%s}`, top, field(name), false},
		}
	}
	var fields []intField
	for _, v := range variants {
		fields = append(fields, limitFields(v, "rateLimit", "10000")...)
		fields = append(fields, limitFields(v, "maxInFlight", "1000")...)
		fields = append(fields, intField{"ttl", v, "POST", fixed(strings.TrimSuffix(v.collection, "/webhooks") + "/portal-sessions"), `{"ttl":%s}`, "86400", ttl, false})
	}
	threshold := `{"event":"analytics.threshold","data":{"websiteId":%s,"brandId":%s,"metric":"pageViews","value":%s,"threshold":%s,"thresholdType":"reached"}}`
	fields = append(fields,
		intField{"brandId", b, "POST", fixed("/v2/svc/v2/websites"), `{"slug":"s","brandId":%s}`, "9007199254740991", field("brandId"), false},
		intField{"increment", b, "POST", func() string { return site() + "/analytics" }, `{"metric":"pageViews","increment":%s}`, "1000000", field("value"), false},
		intField{"data.id", a, "POST", fixed(eventsPath(a)), `{"eventType":"campaign.created","data":{"id":%s,"name":"C","platform":"meta","status":"active","startDate":"2026-01-01T00:00:00.000Z","endDate":"2026-02-01T00:00:00.000Z","budget":10}}`, "9007199254740991", event(a, "id"), true},
		intField{"data.websiteId", b, "POST", fixed(eventsPath(b)), fmt.Sprintf(threshold, "%s", "2", "150", "100"), "9007199254740991", event(b, "websiteId"), true},
		intField{"data.brandId", b, "POST", fixed(eventsPath(b)), fmt.Sprintf(threshold, "1", "%s", "150", "100"), "9007199254740991", event(b, "brandId"), true},
		intField{"data.value", b, "POST", fixed(eventsPath(b)), fmt.Sprintf(threshold, "1", "2", "%s", "100"), "9007199254740991", event(b, "value"), true},
		intField{"data.threshold", b, "POST", fixed(eventsPath(b)), fmt.Sprintf(threshold, "1", "2", "150", "%s"), "9007199254740991", event(b, "threshold"), true},
	)
	// Created websites need slugs of their own.
	slug := 0
	for _, f := range fields {
		t.Run(f.v.name+" "+f.method+" "+f.name, func(t *testing.T) {
			send := func(lit string) response {
				body := fmt.Sprintf(f.body, lit)
				if strings.Contains(body, `"slug":"s"`) {
					slug++
					body = strings.Replace(body, `"slug":"s"`, fmt.Sprintf(`"slug":"spelled-%d"`, slug), 1)
				}
				return e.do(t, f.method, f.path(), f.v.auth(key), body)
			}
			for _, lit := range []string{"100", "1e2", "1E2", "1e+2", "100.0", "100.000", "10000e-2", "0.1e3", "1.00E2"} {
				r := send(lit)
				if r.status >= 300 {
					t.Errorf("%s: %d %s, want it taken as 100", lit, r.status, r.raw)
					continue
				}
				tolerance := 0.0
				if f.name == "ttl" {
					tolerance = 2 // seconds that pass between the request and the reading
				}
				if got := f.value(t, r); math.Abs(got-100) > tolerance {
					t.Errorf("%s: the field took %v, want 100: %s", lit, got, r.raw)
				}
			}
			wrongType, code := http.StatusBadRequest, "invalid_request"
			if f.data {
				wrongType, code = http.StatusUnprocessableEntity, "validation_failed"
			}
			for _, lit := range []string{"1.5", "100.01", "1e-2", "1E-400", `"100"`, "true"} {
				r := send(lit)
				if r.status != wrongType || r.body["field"] != f.name || r.body["code"] != code {
					t.Errorf("%s: %d %s, want %d %s naming %s", lit, r.status, r.raw, wrongType, code, f.name)
				}
			}
			for _, lit := range []string{"1e400", "1E+400", "1e16", "9007199254740993", "-1e400", "-1e2"} {
				r := send(lit)
				msg, _ := r.body["message"].(string)
				if r.status != http.StatusUnprocessableEntity || r.body["field"] != f.name || r.body["code"] != "validation_failed" ||
					!strings.HasPrefix(lit, "-") && !strings.Contains(msg, f.top) {
					t.Errorf("%s: %d %s, want 422 validation_failed naming %s and its range (to %s)", lit, r.status, r.raw, f.name, f.top)
				}
			}
		})
	}
}
