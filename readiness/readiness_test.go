package readiness_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/readiness"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestCheck: the database answers and Temporal, on a port where nothing listens or absent, does
// not; once the database is closed, neither Check nor DatabaseUp says it answers.
func TestCheck(t *testing.T) {
	db, err := model.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "webhookd.db"))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	quiet := slog.New(slog.DiscardHandler)
	for _, temporal := range []client.Client{tc, nil} {
		c, err := readiness.New(db, temporal, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if database, temporal := c.Check(t.Context()); database != readiness.OK || temporal != readiness.Unavailable {
			t.Fatalf("Check = %s, %s; want ok, unavailable", database, temporal)
		}
		if !c.DatabaseUp(t.Context()) {
			t.Fatal("DatabaseUp = false with the database open")
		}
	}
	c, err := readiness.New(db, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if database, _ := c.Check(t.Context()); database != readiness.Unavailable {
		t.Fatalf("Check's database = %s with the database closed", database)
	}
	if c.DatabaseUp(t.Context()) {
		t.Fatal("DatabaseUp = true with the database closed")
	}
	if _, err := readiness.New(nil, nil, nil); err == nil {
		t.Fatal("New without a database")
	}
}
