//go:build integration

package api_test

import (
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
)

func TestPortalSessionDatabaseDown(t *testing.T) {
	db := dbtest.Postgres(t)
	e := newEnv(t, db)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			auth := v.auth(newKey(t, e.db))
			restore := dbtest.Outage(t, db)
			r := e.do(t, "POST", portalPath(v), auth, `{"ttl":60}`)
			r.expectError(t, v, http.StatusServiceUnavailable, "")
			if r.header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			restore()
			e.do(t, "POST", portalPath(v), auth, `{"ttl":60}`).expect(t, http.StatusCreated, "")
		})
	}
}
