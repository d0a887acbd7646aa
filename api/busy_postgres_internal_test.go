//go:build integration

package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
)

// TestBusyPostgresIs503 is TestBusyDatabaseIs503 on PostgreSQL: its serialization failures,
// deadlocks and lock timeouts are 503, a unique violation 500.
func TestBusyPostgresIs503(t *testing.T) {
	ctx := context.Background()
	db := dbtest.Postgres(t)
	for _, tc := range []struct {
		condition string
		status    int
	}{
		{"serialization_failure", http.StatusServiceUnavailable},
		{"deadlock_detected", http.StatusServiceUnavailable},
		{"lock_not_available", http.StatusServiceUnavailable},
		{"unique_violation", http.StatusInternalServerError},
	} {
		t.Run(tc.condition, func(t *testing.T) {
			_, err := db.ExecContext(ctx, fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '%s'; END $$`, tc.condition))
			if err == nil {
				t.Fatal("the raise did not fail")
			}
			checkMapped(t, db, err, tc.status)
		})
	}
	t.Run("lock_timeout", func(t *testing.T) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }() // the lock is all it is for
		if _, err := tx.ExecContext(ctx, "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		waiter, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = waiter.Rollback() }() // it fails by design
		if _, err := waiter.ExecContext(ctx, "SET LOCAL lock_timeout = '20ms'"); err != nil {
			t.Fatal(err)
		}
		_, err = waiter.ExecContext(ctx, "LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE")
		if err == nil {
			t.Fatal("a second lock succeeded")
		}
		checkMapped(t, db, err, http.StatusServiceUnavailable)
	})
}
