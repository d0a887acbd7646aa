package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/webhookd/webhookd/docs"
	"github.com/webhookd/webhookd/model/dbtest"
)

// fanBody is a fan intake operation, a body it accepts, and the fields whose values only intake
// can judge: a phone number's validity (libphonenumber, in the fan's source.country) and an IP
// address (the OpenAPI 3.0 document gives it as a described string; the JSON Schemas of the
// events say ipv4 or ipv6).
type fanBody struct {
	path       string
	example    string
	onlyIntake []string
}

var fanBodies = []fanBody{
	{"/leads", `{"collectDataId":"blk_1","email":"fan@example.com","phone":"+4915123456789","name":"Fan","customFields":{"city":"Köln"},` +
		`"source":{"referrer":"https://t.co/x","userAgent":"UA","ipAddress":"203.0.113.9","country":"DE"}}`, []string{"phone", "source.ipAddress"}},
	{"/presaves", `{"platform":"spotify","fanEmail":"fan@example.com","releaseDate":"2026-12-01T00:00:00Z","releaseUrl":"https://open.example.com/a",` +
		`"boosts":{"followedArtist":true,"savedCatalog":false,"emailCollected":true}}`, nil},
	{"/analytics", `{"metric":"pageViews","increment":5}`, nil},
}

// fanMutations are the values each field is given: other JSON types, and edge values of the kinds
// the fan bodies hold.
var fanMutations = map[string]any{
	"null": nil, "true": true, "7": 7, "0": 0, "1e2": 1e2, "2.5": 2.5, "1000001": 1000001, "object": map[string]any{}, "array": []any{},
	"empty": "", "blank": "  ", "x": "x", "NUL": "a\x00b", "signups": "signups", "totalClicks": "totalClicks",
	"national phone": "0151 2345 6789", "short phone": "12", "e-mail": "fan@example.com", "e-mail without a dot": "fan@example",
	"url": "https://example.com/", "not a url": "example.com", "ipv6": "2001:db8::1", "not an ip": "256.0.0.1",
	"time": "2026-05-01T12:00:00+02:00", "month 13": "2026-13-01T00:00:00Z", "map of strings": map[string]any{"a": "b"},
	"map with a number": map[string]any{"a": 1},
}

// TestFanBodiesAgreeWithIntake (issue 41): the bodies of POST /websites/<id>/leads, /presaves and
// /analytics in docs/openapi.yaml accept what intake accepts. From a body intake takes, every field
// (nested ones too) is left out, set to each of fanMutations, and an unknown field is added; each
// body goes through the real handler, and the document's schema must agree with its answer, but for
// the values of the fields only intake judges, where the document may accept what intake refuses.
func TestFanBodiesAgreeWithIntake(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	b := dbtest.Backends()[0]
	e := newEnv(t, b.Open(t))
	v := variants[1]
	auth := v.auth(newKey(t, e.db))
	site := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"s"}`).data(t)["id"])
	e.do(t, "POST", site+"/publish", auth, "").expect(t, 200, "")
	accepted, refused := 0, 0
	for _, fb := range fanBodies {
		op := doc.Paths.Find("/v2/svc/v2/websites/{id}" + fb.path).Post
		schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
		var example map[string]any
		if err := json.Unmarshal([]byte(fb.example), &example); err != nil {
			t.Fatal(err)
		}
		for _, c := range fanCases("", example) {
			raw, err := json.Marshal(c.body)
			if err != nil {
				t.Fatal(err)
			}
			r := e.do(t, "POST", site+fb.path, auth, string(raw))
			intake := r.status/100 == 2
			if intake {
				accepted++
			} else {
				refused++
			}
			var decoded any
			if err := json.Unmarshal(raw, &decoded); err != nil {
				t.Fatal(err)
			}
			docErr := schema.VisitJSON(decoded)
			switch {
			case intake && docErr != nil:
				t.Errorf("%s %s: intake accepts it, docs/openapi.yaml refuses it: %v\n%s", fb.path, c.name, firstLine(docErr), raw)
			case !intake && docErr == nil && !slices.Contains(fb.onlyIntake, c.field):
				t.Errorf("%s %s: intake refuses it (%d %s), docs/openapi.yaml accepts it\n%s", fb.path, c.name, r.status, r.raw, raw)
			}
		}
	}
	t.Logf("%d bodies intake accepts, %d it refuses", accepted, refused)
	if accepted < 40 || refused < 100 {
		t.Errorf("too few cases: %d accepted, %d refused", accepted, refused)
	}
}

type fanCase struct {
	name, field string
	body        map[string]any
}

// fanCases derives bodies from example: each field left out and set to each mutation, recursing
// into nested objects, and an unknown field added.
func fanCases(prefix string, example map[string]any) []fanCase {
	clone := func() map[string]any {
		var c map[string]any
		raw, _ := json.Marshal(example)
		_ = json.Unmarshal(raw, &c)
		return c
	}
	extra := clone()
	extra["extra"] = "x"
	out := []fanCase{{name: prefix + "extra field", field: prefix + "extra", body: extra}}
	for _, name := range slices.Sorted(maps.Keys(example)) {
		field := prefix + name
		c := clone()
		delete(c, name)
		out = append(out, fanCase{name: field + " left out", field: field, body: c})
		for _, m := range slices.Sorted(maps.Keys(fanMutations)) {
			c := clone()
			c[name] = fanMutations[m]
			out = append(out, fanCase{name: fmt.Sprintf("%s = %s", field, m), field: field, body: c})
		}
		if sub, ok := example[name].(map[string]any); ok && name != "customFields" {
			for _, inner := range fanCases(field+".", sub) {
				c := clone()
				c[name] = inner.body
				out = append(out, fanCase{name: inner.name, field: inner.field, body: c})
			}
		}
	}
	return out
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
