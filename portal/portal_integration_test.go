//go:build integration

package portal_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestDatabaseDown: with the database away a page is 503 with Retry-After, and no internal text.
func TestDatabaseDown(t *testing.T) {
	db := dbtest.Postgres(t)
	e := newEnv(t, db)
	account := e.account(t)
	cookie := e.enter(t, e.link(t, account.ID, model.VariantB, false))
	token := e.link(t, account.ID, model.VariantB, false)
	restore := dbtest.Outage(t, db)
	for _, path := range []string{"/portal/", "/portal/enter?token=" + token} {
		rec := e.do(t, "GET", path, cookie, nil)
		expect(t, rec, http.StatusServiceUnavailable)
		if rec.Header().Get("Retry-After") == "" || strings.Contains(rec.Body.String(), "SQLSTATE") || strings.Contains(rec.Body.String(), "connection") {
			t.Fatalf("GET %s: %v\n%s", path, rec.Header(), rec.Body)
		}
	}
	restore()
	expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusOK)
	expect(t, e.do(t, "GET", "/portal/enter?token="+token, nil, nil), http.StatusSeeOther)
}
