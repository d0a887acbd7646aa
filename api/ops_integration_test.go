//go:build integration

package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestDatabaseDown: with the database unreachable every operation answers 503 with the variant's
// envelope and no internal text, and nothing is half-written once it is back.
func TestDatabaseDown(t *testing.T) {
	db := dbtest.Postgres(t)
	e := newEnv(t, db)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			auth := v.auth(newKey(t, e.db))
			e.do(t, "POST", v.collection, auth, createBody("https://before.example.com/", v.eventType)).expect(t, 201, "")
			restore := dbtest.Outage(t, db)
			for _, req := range []struct{ method, path, body string }{
				{"GET", v.collection, ""},
				{"POST", v.collection, createBody("https://during.example.com/", v.eventType)},
				{"GET", v.collection + "/1", ""},
				{"PUT", v.collection + "/1", `{"url":"https://during.example.com/"}`},
				{"PATCH", v.collection + "/1", `{"rateLimit":5}`},
				{"PATCH", v.collection + "/1", `{}`},
				{"DELETE", v.collection + "/1", ""},
				{"GET", v.collection + "/1/deliveries/1", ""},
				{"POST", v.collection + "/1/deliveries/1/retry", ""},
				{"POST", v.collection + "/1/recover", `{"since":"2026-01-01T00:00:00Z"}`},
				{"POST", v.collection + "/1/test", ""},
			} {
				r := e.do(t, req.method, req.path, auth, req.body)
				r.expect(t, http.StatusServiceUnavailable, "unavailable")
				v.errEnvelope(t, r)
				if r.header.Get("Retry-After") == "" {
					t.Errorf("%s %s: 503 without Retry-After", req.method, req.path)
				}
				for _, leak := range []string{"pq", "pgdriver", "SQLSTATE", "connection", "database \""} {
					if strings.Contains(string(r.raw), leak) {
						t.Fatalf("503 body leaks internal text %q: %s", leak, r.raw)
					}
				}
			}
			ready := e.do(t, "GET", "/readyz", nil, "")
			if ready.status != http.StatusServiceUnavailable || ready.body["checks"].(map[string]any)["database"] != "unavailable" {
				t.Fatalf("readyz during outage: %d %s", ready.status, ready.raw)
			}
			restore()
			list := e.do(t, "GET", v.collection, auth, "")
			list.expect(t, 200, "")
			items := list.list(t)
			if len(items) != 1 || items[0].(map[string]any)["url"] != "https://before.example.com/" {
				t.Fatalf("after the outage the webhooks are %s", list.raw)
			}
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	e.do(t, "GET", "/healthz", nil, "").expect(t, 200, "")

	// The test env's Temporal client points at a closed port: the API still takes events (the
	// outbox keeps them), so it stays ready and says it is degraded.
	r := e.do(t, "GET", "/readyz", nil, "")
	if r.status != 200 || r.body["status"] != "degraded" || r.body["checks"].(map[string]any)["temporal"] != "unavailable" || r.body["checks"].(map[string]any)["database"] != "ok" {
		t.Fatalf("readyz without Temporal = %d %s", r.status, r.raw)
	}

	tc := temporaltest.Start(t).Client(t)
	up := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Temporal = tc })
	r = up.do(t, "GET", "/readyz", nil, "")
	if r.status != 200 || r.body["status"] != "ok" {
		t.Fatalf("readyz with Temporal = %d %s", r.status, r.raw)
	}
}
