package model_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestLockSweepIsExclusive: on PostgreSQL one replica sweeps at a time and the next can once it is
// done; SQLite, one process, always sweeps.
func TestLockSweepIsExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		unlock, ok, err := model.LockSweep(ctx, db.DB)
		if err != nil || !ok {
			t.Fatalf("first sweep lock: ok %v, %v", ok, err)
		}
		_, second, err := model.LockSweep(ctx, db.DB)
		if err != nil {
			t.Fatal(err)
		}
		if want := !model.IsPostgres(db); second != want {
			t.Errorf("second sweep lock while the first is held: ok %v, want %v", second, want)
		}
		unlock()
		again, ok, err := model.LockSweep(ctx, db.DB)
		if err != nil || !ok {
			t.Fatalf("sweep lock after unlock: ok %v, %v", ok, err)
		}
		again()
	})
}
