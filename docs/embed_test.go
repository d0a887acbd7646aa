package docs_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/webhookd/webhookd/docs"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return doc
}

func TestOpenAPIIsValid(t *testing.T) {
	doc := load(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
}

// TestManagementOperationsDocumentErrors keeps the error responses complete as operations are
// added: a client must find every status the error handler can produce.
func TestManagementOperationsDocumentErrors(t *testing.T) {
	doc := load(t)
	prefixes := map[string]string{"/api/svc/v2/": "apiKey", "/v2/svc/v2/": "bearer"}
	seen := 0
	for path, item := range doc.Paths.Map() {
		var scheme string
		for prefix, s := range prefixes {
			if strings.HasPrefix(path, prefix) {
				scheme = s
			}
		}
		if scheme == "" {
			continue
		}
		for method, op := range item.Operations() {
			seen++
			name := method + " " + path
			want := []int{400, 401, 422, 429, 500, 503}
			if strings.Contains(path, "{id}") {
				want = append(want, http.StatusNotFound)
			}
			if op.RequestBody != nil {
				want = append(want, http.StatusRequestEntityTooLarge)
			}
			// A read or publish key is refused (403 insufficient_scope) everywhere but the event
			// log, which every scope reads (docs/api.md, "Scoped API keys").
			everyScope := method == http.MethodGet && (strings.HasSuffix(path, "/events") || strings.HasSuffix(path, "/events/{id}") || strings.HasSuffix(path, "/event-types"))
			if everyScope && op.Responses.Status(http.StatusForbidden) != nil {
				t.Errorf("%s: documents 403, which no key scope gets", name)
			}
			if !everyScope {
				want = append(want, http.StatusForbidden)
			}
			for _, status := range want {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: no %d response", name, status)
				}
			}
			if op.Security == nil || len(*op.Security) != 1 || (*op.Security)[0][scheme] == nil {
				t.Errorf("%s: security is not %s alone", name, scheme)
			}
		}
	}
	if seen != 93 {
		t.Errorf("found %d management operations, want 93 (27 webhook, 8 notification, 1 audit-log and 4 delivery log and replay operations per variant, 4 campaign, 6 website and 3 fan operations)", seen)
	}
}

// TestEveryResponseIsStrict makes drift visible: a response object that tolerates unknown fields
// would let a handler add one without any test noticing.
func TestEveryResponseIsStrict(t *testing.T) {
	doc := load(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, ref := range op.Responses.Map() {
				name := method + " " + path + " " + code
				if ref.Value.Headers["X-Request-Id"] == nil {
					t.Errorf("%s: X-Request-Id not documented", name)
				}
				if status, _ := strconv.Atoi(code); status == http.StatusTooManyRequests {
					if h := ref.Value.Headers["Retry-After"]; h == nil || !h.Value.Required {
						t.Errorf("%s: Retry-After not documented as required", name)
					}
				}
				for mediaType, content := range ref.Value.Content {
					checkStrict(t, name+" "+mediaType, content.Schema, nil)
				}
			}
		}
	}
}

func checkStrict(t *testing.T, name string, ref *openapi3.SchemaRef, visited []*openapi3.Schema) {
	t.Helper()
	s := ref.Value
	if slices.Contains(visited, s) {
		return
	}
	visited = append(visited, s)
	if s.Type.Is(openapi3.TypeObject) && len(s.Properties) > 0 {
		if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
			t.Errorf("%s: object %s allows additional properties", name, ref.Ref)
		}
		for prop := range s.Properties {
			if !slices.Contains(s.Required, prop) && !optional(prop) {
				t.Errorf("%s: property %q of %s is not required", name, prop, ref.Ref)
			}
		}
	}
	for prop, p := range s.Properties {
		checkStrict(t, name+"."+prop, p, visited)
	}
	if s.Items != nil {
		checkStrict(t, name+"[]", s.Items, visited)
	}
}

// optional lists the only response fields that may be absent: field names the input at fault
// only when there is one, and variant A carries message only on delete (DESIGN.md).
func optional(prop string) bool { return prop == "field" || prop == "message" }
