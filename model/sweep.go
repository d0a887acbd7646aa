package model

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// sweepLockID is the PostgreSQL advisory lock key held by the one worker replica sweeping the
// outbox at a time.
const sweepLockID = 7_201_002

// LockSweep takes the outbox sweep for this process, or reports that another replica is sweeping
// (ok false): every worker replica runs the sweeper, and without it they would all start the same
// deliveries, each start a wasted round trip to Temporal. The lock is held by one connection, not
// a transaction, so no transaction stays open while the sweep calls Temporal; it is released by
// unlock, or by PostgreSQL when the connection or the replica dies. SQLite serves one process, so
// there it is always granted.
func LockSweep(ctx context.Context, db *bun.DB) (unlock func(), ok bool, err error) {
	if !IsPostgres(db) {
		return func() {}, true, nil
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("sweep lock: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", sweepLockID).Scan(&ok); err != nil {
		_ = conn.Close()
		return nil, false, fmt.Errorf("sweep lock: %w", err)
	}
	if !ok {
		return nil, false, conn.Close()
	}
	return func() {
		// Unlock on the same connection; if that fails, closing it releases the lock anyway.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", sweepLockID)
		_ = conn.Close()
	}, true, nil
}
