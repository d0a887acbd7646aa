package model

import (
	"errors"
	"strings"

	"github.com/uptrace/bun/driver/pgdriver"
)

// PostgreSQL SQLSTATEs of a transaction that lost to another one: retrying it later can succeed.
var busyStates = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"55P03": true, // lock_not_available (lock_timeout, NOWAIT)
}

// SQLite primary result codes of a database another connection holds.
const (
	sqliteBusy   = 5 // SQLITE_BUSY
	sqliteLocked = 6 // SQLITE_LOCKED
)

// IsBusy reports whether err is the database refusing work because of other work (SQLite busy or
// locked, PostgreSQL lock timeout, deadlock or serialization failure): an overload that a retry
// can get past, not a defect.
func IsBusy(err error) bool {
	if err == nil {
		return false
	}
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return busyStates[pgErr.Field('C')]
	}
	// modernc.org/sqlite's *Error has Code(); extended codes keep the primary code in the low byte.
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		switch coded.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true
		}
	}
	// Other SQLite drivers say it in words only.
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "SQLITE_LOCKED") ||
		strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
}
