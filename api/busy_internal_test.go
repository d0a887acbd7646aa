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
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/readiness"
)

// TestBusyDatabaseIs503: a database refusing work because of other work (SQLite busy, PostgreSQL
// lock timeout, deadlock, serialization failure) is an overload the client should retry: 503 with
// Retry-After, never 500. A constraint violation while the database answers stays a defect (500).
// The PostgreSQL half is TestBusyPostgresIs503, in the integration tier.
func TestBusyDatabaseIs503(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db := dbtest.SQLite(t)
		checkMapped(t, db, sqliteBusyError(t, db), http.StatusServiceUnavailable)
	})
}

// sqliteBusyError returns the error a writer gets from SQLite while another connection holds the write
// lock, with busy_timeout 0 so that it comes at once.
func sqliteBusyError(t *testing.T, db *model.DB) error {
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
func checkMapped(t *testing.T, db *model.DB, err error, status int) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ready, readyErr := readiness.New(db, nil, log)
	if readyErr != nil {
		t.Fatal(readyErr)
	}
	s := &Server{readiness: ready, log: log}
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
