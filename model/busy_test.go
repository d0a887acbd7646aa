package model

import (
	"errors"
	"fmt"
	"testing"
)

// sqliteCoded stands for modernc.org/sqlite's *Error, which carries the result code.
type sqliteCoded struct{ code int }

func (e sqliteCoded) Error() string { return fmt.Sprintf("sqlite error %d", e.code) }
func (e sqliteCoded) Code() int     { return e.code }

// TestIsBusy: the busy and locked results of SQLite drivers are busy, by code (extended codes
// included) or in words; other failures are not. PostgreSQL's are covered against a real server
// in api's TestBusyDatabaseIs503.
func TestIsBusy(t *testing.T) {
	for _, tc := range []struct {
		err  error
		busy bool
	}{
		{nil, false},
		{errors.New("no such table: events"), false},
		{sqliteCoded{5}, true},
		{sqliteCoded{517}, true}, // SQLITE_BUSY_SNAPSHOT
		{sqliteCoded{6}, true},
		{sqliteCoded{19}, false}, // SQLITE_CONSTRAINT
		{fmt.Errorf("save website: %w", errors.New("database is locked")), true},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), true},
	} {
		if got := IsBusy(tc.err); got != tc.busy {
			t.Errorf("IsBusy(%v) = %v, want %v", tc.err, got, tc.busy)
		}
	}
}
