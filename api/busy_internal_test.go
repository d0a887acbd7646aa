package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/webhookd/webhookd/model/dbtest"
)

// TestBusyDatabaseIs503: a database refusing work because of other work (SQLite busy, PostgreSQL
// lock timeout, deadlock, serialization failure) is an overload the client should retry: 503 with
// Retry-After, never 500. A constraint violation while the database answers stays a defect (500).
func TestBusyDatabaseIs503(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		db := dbtest.SQLite(t)
		checkMapped(t, db, sqliteBusyError(t, db), http.StatusServiceUnavailable)
	})
	t.Run("postgres", func(t *testing.T) {
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
	})
}

// sqliteBusyError returns the error a writer gets from SQLite while another connection holds the write
// lock, with busy_timeout 0 so that it comes at once.
func sqliteBusyError(t *testing.T, db *bun.DB) error {
	t.Helper()
	ctx := context.Background()
	var seq int
	var name, file string
	if err := db.QueryRowContext(ctx, "PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open(sqliteshim.ShimName, "file:"+file+"?"+url.Values{"_pragma": {"busy_timeout(0)"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tx, err := db.BeginTx(ctx, nil) // immediate: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // the lock is all it is for
	_, err = other.ExecContext(ctx, "UPDATE accounts SET id = id")
	if err == nil {
		t.Fatal("a second writer got in while the write lock was held")
	}
	return err
}

// checkMapped sends err through the server's error handler, wrapped the way a handler wraps it.
func checkMapped(t *testing.T, db *bun.DB, err error, status int) {
	t.Helper()
	s := &Server{db: db, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPatch, "/api/svc/v2/campaigns/1", nil), rec)
	s.handleError(fmt.Errorf("update campaign: %w", err), c)
	if rec.Code != status {
		t.Fatalf("%v: status %d, want %d: %s", err, rec.Code, status, rec.Body)
	}
	var body struct{ Code string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if status == http.StatusServiceUnavailable && (body.Code != codeUnavailable || rec.Header().Get("Retry-After") == "") {
		t.Fatalf("%v: code %q, Retry-After %q", err, body.Code, rec.Header().Get("Retry-After"))
	}
}
