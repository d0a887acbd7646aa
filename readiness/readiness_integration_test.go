//go:build integration

package readiness_test

import (
	"log/slog"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/readiness"
)

// TestPostgresOutage: while PostgreSQL refuses connections, the database is unavailable to Check
// and DatabaseUp; once it is back, both say it answers.
func TestPostgresOutage(t *testing.T) {
	db := dbtest.Postgres(t)
	c, err := readiness.New(db, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if database, _ := c.Check(t.Context()); database != readiness.OK || !c.DatabaseUp(t.Context()) {
		t.Fatalf("before the outage: Check's database = %s, DatabaseUp = %v", database, c.DatabaseUp(t.Context()))
	}
	restore := dbtest.Outage(t, db)
	if database, _ := c.Check(t.Context()); database != readiness.Unavailable {
		t.Fatalf("during the outage: Check's database = %s", database)
	}
	if c.DatabaseUp(t.Context()) {
		t.Fatal("during the outage: DatabaseUp = true")
	}
	restore()
	if !c.DatabaseUp(t.Context()) {
		t.Fatal("after the outage: DatabaseUp = false")
	}
}
