//go:build integration

package api_test

import (
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
)

// TestEventLogDatabaseDown: with the database unreachable both reads answer 503 in the variant's
// envelope with Retry-After, and answer again once it is back.
func TestEventLogDatabaseDown(t *testing.T) {
	db := dbtest.Postgres(t)
	e := newEnv(t, db)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			auth := v.auth(newKey(t, e.db))
			r := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name]))
			r.expect(t, http.StatusAccepted, "")
			paths := []string{eventsPath(v), eventsPath(v) + "/" + jsonNumber(r.data(t)["id"])}
			restore := dbtest.Outage(t, db)
			for _, path := range paths {
				r := e.do(t, "GET", path, auth, "")
				r.expectError(t, v, http.StatusServiceUnavailable, "")
				r.expect(t, http.StatusServiceUnavailable, "unavailable")
				if r.header.Get("Retry-After") == "" {
					t.Errorf("GET %s: 503 without Retry-After", path)
				}
			}
			restore()
			for _, path := range paths {
				e.do(t, "GET", path, auth, "").expect(t, http.StatusOK, "")
			}
		})
	}
}
