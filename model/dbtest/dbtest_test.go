package dbtest_test

import (
	"testing"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// assertMigrated fails unless db holds the schema with no rows in it.
func assertMigrated(t *testing.T, db *model.DB) {
	t.Helper()
	ctx := t.Context()
	versions, err := db.NewSelect().Table("schema_migrations").Count(ctx)
	if err != nil || versions == 0 {
		t.Fatalf("schema_migrations rows = %d, %v; want at least one", versions, err)
	}
	for _, table := range []string{"accounts", "webhooks", "events", "deliveries"} {
		n, err := db.NewSelect().Table(table).Count(ctx)
		if err != nil || n != 0 {
			t.Fatalf("%s rows = %d, %v; want an empty table", table, n, err)
		}
	}
}

func addAccount(t *testing.T, db bun.IDB, email string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), "INSERT INTO accounts (owner_email, created_at) VALUES (?, ?)", email, model.Now()); err != nil {
		t.Fatalf("insert account: %v", err)
	}
}

func countAccounts(t *testing.T, db bun.IDB) int {
	t.Helper()
	n, err := db.NewSelect().Table("accounts").Count(t.Context())
	if err != nil {
		t.Fatalf("count accounts: %v", err)
	}
	return int(n)
}

func TestBackendsOpenMigrated(t *testing.T) {
	wantPG := map[string]bool{"sqlite": false, "postgres": true}
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			if got := model.IsPostgres(db); got != wantPG[b.Name] {
				t.Fatalf("IsPostgres = %v for backend %q", got, b.Name)
			}
			assertMigrated(t, db)
			addAccount(t, db, "owner@example.com")
			if n := countAccounts(t, db); n != 1 {
				t.Fatalf("accounts after insert = %d, want 1", n)
			}
		})
	}
}
