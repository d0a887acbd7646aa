package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestEventSchemasServed: each entry of GET <prefix>/event-types carries its data's JSON Schema and
// that schema's stable URL, which serves the same schema without a key, $id added; the entry's
// example validates against it and a broken example does not. A type or file that does not exist is
// 404, and the deliveries' envelopes and 3.1 document are served too.
func TestEventSchemasServed(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		r := e.do(t, "GET", strings.TrimSuffix(v.collection, "/webhooks")+"/event-types", auth, "")
		r.expect(t, http.StatusOK, "")
		for _, item := range r.list(t) {
			et := item.(map[string]any)
			name, url := et["type"].(string), et["schemaUrl"].(string)
			if url != "/schemas/events/"+name+"/v1.json" {
				t.Errorf("%s: schemaUrl %q", name, url)
			}
			served := e.do(t, "GET", url, nil, "")
			served.expect(t, http.StatusOK, "")
			if ct := served.header.Get("Content-Type"); ct != "application/schema+json" {
				t.Errorf("%s: Content-Type %q", name, ct)
			}
			var schema map[string]any
			if err := json.Unmarshal(served.raw, &schema); err != nil {
				t.Fatal(err)
			}
			if id, _ := schema["$id"].(string); !strings.HasSuffix(id, url) {
				t.Errorf("%s: $id %q", name, id)
			}
			delete(schema, "$id")
			if !reflect.DeepEqual(schema, et["schema"]) {
				t.Errorf("%s: the catalog's schema and %s differ", name, url)
			}
			sch := schematest.Compile(t, served.raw)
			example, _ := json.Marshal(et["example"])
			if err := schematest.Validate(t, sch, example); err != nil {
				t.Errorf("%s: the example fails its schema: %v", name, err)
			}
			broken := map[string]any{}
			for k, val := range et["example"].(map[string]any) {
				broken[k] = val
			}
			broken["unknownField"] = 1
			raw, _ := json.Marshal(broken)
			if schematest.Validate(t, sch, raw) == nil {
				t.Errorf("%s: an extra field passes the schema", name)
			}
		}
		letter := strings.ToLower(v.name)
		env := e.do(t, "GET", "/schemas/deliveries/"+letter+".json", nil, "")
		env.expect(t, http.StatusOK, "")
		schematest.Compile(t, env.raw)
	})
	e := newEnv(t, dbtest.SQLite(t))
	for _, path := range []string{"/schemas/events/campaign.nope/v1.json", "/schemas/events/campaign.created/v2.json",
		"/schemas/events/campaign.created/v1", "/schemas/deliveries/c.json", "/schemas/deliveries/A.json", "/schemas/deliveries/a"} {
		e.do(t, "GET", path, nil, "").expect(t, http.StatusNotFound, "not_found")
	}
	doc := e.do(t, "GET", "/openapi-webhooks.yaml", nil, "")
	doc.expect(t, http.StatusOK, "")
	if !bytes.HasPrefix(doc.raw, []byte("# Generated")) || !bytes.Contains(doc.raw, []byte("openapi: 3.1.0")) {
		t.Errorf("/openapi-webhooks.yaml is not the deliveries' document: %.200s", doc.raw)
	}
}
