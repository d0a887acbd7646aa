//go:build integration

package dbtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestPostgresDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := dbtest.Postgres(t), dbtest.Postgres(t)
	var nameA, nameB string
	if err := a.NewRaw("SELECT current_database()").Scan(t.Context(), &nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.NewRaw("SELECT current_database()").Scan(t.Context(), &nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB {
		t.Fatalf("both databases are %q", nameA)
	}
	addAccount(t, a, "only-in-a@example.com")
	if n := countAccounts(t, b); n != 0 {
		t.Fatalf("database b sees %d accounts written to database a", n)
	}
	if n := countAccounts(t, a); n != 1 {
		t.Fatalf("database a has %d accounts, want 1", n)
	}
}

// Many tests create databases at once from the same template; none may fail for it.
func TestPostgresInParallel(t *testing.T) {
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			db := dbtest.Postgres(t)
			assertMigrated(t, db)
			addAccount(t, db, "owner@example.com")
		})
	}
}

func TestPostgresURLIsMigratedAndDroppedAtCleanup(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		db, err := model.Open(t.Context(), dbtest.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		assertMigrated(t, db)
		if err := db.NewRaw("SELECT current_database()").Scan(t.Context(), &name); err != nil {
			t.Fatal(err)
		}
	})
	// pg_database is shared by all databases of a server, so any of them can see the drop.
	other := dbtest.Postgres(t)
	n, err := other.NewSelect().Table("pg_database").Where("datname = ?", name).Count(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("database %q still exists after its test (count %d, err %v)", name, n, err)
	}
}

func TestOutageAndRestore(t *testing.T) {
	t.Parallel()
	db := dbtest.Postgres(t)
	bystander := dbtest.Postgres(t)
	addAccount(t, db, "owner@example.com") // leaves a pooled session for the outage to kill

	restore := dbtest.Outage(t, db)
	for i := range 3 { // a broken pooled connection and a fresh dial must both fail
		if _, err := db.ExecContext(t.Context(), "SELECT 1"); err == nil {
			t.Fatalf("query %d during the outage succeeded", i)
		}
	}
	if n := countAccounts(t, bystander); n != 0 {
		t.Fatalf("another database during the outage has %d accounts, want 0", n)
	}

	restore()
	if n := countAccounts(t, db); n != 1 {
		t.Fatalf("accounts after restore = %d, want the 1 written before the outage", n)
	}
	restore() // idempotent, as it also runs at cleanup
}

func TestOutageRestoresAtCleanup(t *testing.T) {
	var url string
	t.Run("outage", func(t *testing.T) {
		url = dbtest.PostgresURL(t)
		db, err := model.Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_ = dbtest.Outage(t, db)
		// The subtest ends with the database shut: cleanup must reopen it before dropping it, and
		// the drop must succeed, or the cleanup reports an error and this subtest fails.
	})
	if t.Failed() {
		t.Fatal("cleanup after an unrestored outage failed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if db, err := model.Open(ctx, url); err == nil {
		db.Close()
		t.Fatalf("database %s still accepts connections after its test ended", url)
	}
}
