package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestWebhookVersion (issue 32): a webhook's version of its event type's data (docs/events.md,
// "Versions") in both variants: the newest (1) when left out or null, shown in every
// representation, set on create, PUT and PATCH and kept when left out; a version the type does
// not have is 422 naming version, a value that is not an integer 400 naming it, and neither
// changes the webhook. (A second version exists only in sources' test fixture, where
// TestPinnedVersionIsDelivered changes a webhook from one version to another.)
func TestWebhookVersion(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		body := func(url, extra string) string {
			return fmt.Sprintf(`{"url":%q,"eventType":%q%s}`, url, v.eventType, extra)
		}
		version := func(r response) any { t.Helper(); return r.data(t)["version"] }

		plain := e.do(t, "POST", v.collection, auth, body("https://plain.example.com/", ""))
		plain.expect(t, http.StatusCreated, "")
		if got := version(plain); got != 1.0 {
			t.Fatalf("created without a version: version %v, want 1", got)
		}
		for _, extra := range []string{`,"version":1`, `,"version":null`} {
			r := e.do(t, "POST", v.collection, auth, body("https://one.example.com/", extra))
			r.expect(t, http.StatusCreated, "")
			if got := version(r); got != 1.0 {
				t.Fatalf("created with %s: version %v, want 1", extra, got)
			}
		}
		for _, bad := range []struct {
			extra  string
			status int
		}{
			{`,"version":2`, http.StatusUnprocessableEntity},
			{`,"version":0`, http.StatusUnprocessableEntity},
			{`,"version":-1`, http.StatusUnprocessableEntity},
			{`,"version":"1"`, http.StatusBadRequest},
			{`,"version":1.5`, http.StatusBadRequest},
			{`,"version":true`, http.StatusBadRequest},
		} {
			r := e.do(t, "POST", v.collection, auth, body("https://bad.example.com/", bad.extra))
			r.expectError(t, v, bad.status, "version")
		}
		listed := e.do(t, "GET", v.collection, auth, "").list(t)
		if len(listed) != 3 {
			t.Fatalf("listed %d webhooks, want 3 (no refused one stored)", len(listed))
		}
		for _, it := range listed {
			if got := it.(map[string]any)["version"]; got != 1.0 {
				t.Fatalf("listed %v: version %v", it, got)
			}
		}

		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(plain.data(t)["id"]))
		if got := version(e.do(t, "GET", one, auth, "")); got != 1.0 {
			t.Fatalf("GET: version %v", got)
		}
		for _, r := range []response{
			e.do(t, "PUT", one, auth, `{"url":"https://plain2.example.com/","version":1}`),
			e.do(t, "PUT", one, auth, `{"url":"https://plain3.example.com/"}`),
			e.do(t, "PATCH", one, auth, `{"version":1}`),
			e.do(t, "PATCH", one, auth, `{}`),
		} {
			r.expect(t, http.StatusOK, "")
			if got := version(r); got != 1.0 {
				t.Fatalf("version %v after %s", got, r.raw)
			}
		}
		for _, bad := range []struct {
			method, body, field string
			status              int
		}{
			{"PUT", `{"url":"https://plain4.example.com/","version":2}`, "version", http.StatusUnprocessableEntity},
			{"PUT", `{"url":"https://plain4.example.com/","version":"2"}`, "version", http.StatusBadRequest},
			{"PATCH", `{"version":3}`, "version", http.StatusUnprocessableEntity},
			{"PATCH", `{"version":0}`, "version", http.StatusUnprocessableEntity},
			{"PATCH", `{"version":[1]}`, "version", http.StatusBadRequest},
		} {
			e.do(t, bad.method, one, auth, bad.body).expectError(t, v, bad.status, bad.field)
		}
		if stored := loadWebhook(t, e, plain.data(t)["id"]); stored.Version != 1 || stored.URL != "https://plain3.example.com/" {
			t.Fatalf("after the refusals the webhook is %s, version %d", stored.URL, stored.Version)
		}
		// Another account's webhook is not found, whatever the version.
		other := v.auth(newKey(t, e.db))
		e.do(t, "PATCH", one, other, `{"version":2}`).expectError(t, v, http.StatusNotFound, "")
	})
}

// TestEventTypesVersions: every entry of the catalog names its newest version and lists its
// versions; every type has version 1 alone today.
func TestEventTypesVersions(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		r := e.do(t, "GET", strings.TrimSuffix(v.collection, "/webhooks")+"/event-types", auth, "")
		r.expect(t, http.StatusOK, "")
		for _, item := range r.list(t) {
			et := item.(map[string]any)
			versions, _ := et["versions"].([]any)
			if et["version"] != 1.0 || !slices.Equal(versions, []any{1.0}) {
				t.Errorf("%s: version %v, versions %v; want 1, [1]", et["type"], et["version"], et["versions"])
			}
		}
	})
}
