package activities_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestRetentionPurgesAuditLog: a retention batch deletes the audit entries recorded before its
// cutoff, at most its limit of them, and keeps the later ones, as it does the delivery history.
func TestRetentionPurgesAuditLog(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			ctx := t.Context()
			_, acc, err := model.CreateAPIKey(ctx, db, "audit-retention@example.com", "")
			if err != nil {
				t.Fatal(err)
			}
			cutoff := model.Now().Add(-30 * 24 * time.Hour)
			add := func(at time.Time) int64 {
				e := &model.AuditEntry{AccountID: acc.ID, Variant: model.VariantB, At: at, ActorKind: model.ActorKindCLI,
					Action: "webhook.create", TargetType: "webhook", TargetID: "1", Changes: "{}"}
				if err := model.InsertAudit(ctx, db, e); err != nil {
					t.Fatal(err)
				}
				return e.ID
			}
			for i := range 3 {
				add(cutoff.Add(-time.Duration(i+1) * time.Hour))
			}
			kept := add(cutoff.Add(time.Hour))

			ids := purgeInBatches(t, db, cutoff, (*model.AuditEntry)(nil), "entries", 2, 1)
			if len(ids) != 1 || ids[0] != kept {
				t.Fatalf("entries %v, want only %d, recorded after the cutoff", ids, kept)
			}
		})
	}
}

// TestRetentionPurgesEndedReplays: a retention batch deletes the replays that ended before its
// cutoff, at most its limit of them, and keeps those that ended after it and a running one,
// however old.
func TestRetentionPurgesEndedReplays(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			ctx := t.Context()
			_, acc, err := model.CreateAPIKey(ctx, db, "replay-retention@example.com", "")
			if err != nil {
				t.Fatal(err)
			}
			cutoff := model.Now().Add(-30 * 24 * time.Hour)
			add := func(state string, finished *time.Time) int64 {
				r := &model.Replay{AccountID: acc.ID, Variant: model.VariantA, Criteria: "{}"}
				if err := model.CreateReplay(ctx, db, r, []int64{1}, 100); err != nil {
					t.Fatal(err)
				}
				if state != model.ReplayRunning {
					if _, err := model.EndReplay(ctx, db, nil, r.ID, state); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := db.NewUpdate().Model((*model.Replay)(nil)).Set("finished_at = ?", finished).
					Set("created_at = ?", cutoff.Add(-48*time.Hour)).Where("id = ?", r.ID).Exec(ctx); err != nil {
					t.Fatal(err)
				}
				return r.ID
			}
			at := func(d time.Duration) *time.Time { v := cutoff.Add(d); return &v }
			add(model.ReplayDone, at(-time.Hour))
			add(model.ReplayCanceled, at(-2*time.Hour))
			add(model.ReplayDone, at(-3*time.Hour))
			keep := []int64{add(model.ReplayDone, at(time.Hour)), add(model.ReplayRunning, nil)}

			ids := purgeInBatches(t, db, cutoff, (*model.Replay)(nil), "replays", 3, 2)
			if fmt.Sprint(ids) != fmt.Sprint(keep) {
				t.Fatalf("replays %v, want %v: the one that ended after the cutoff and the running one", ids, keep)
			}
		})
	}
}

// purgeInBatches runs retention batches of 2 rows at cutoff, one per count in wants, checking after
// each that wants[i] rows of table (its model; what names them) are left, and returns their ids.
func purgeInBatches(t *testing.T, db *model.DB, cutoff time.Time, table any, what string, wants ...int) []int64 {
	t.Helper()
	a := &activities.Activities{DB: db}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var ids []int64
	for i, want := range wants {
		if _, err := env.ExecuteActivity(a.PurgeExpired, activities.PurgeInput{Before: cutoff, Limit: 2}); err != nil {
			t.Fatal(err)
		}
		ids = nil
		if err := db.NewSelect().Model(table).Column("id").OrderExpr("id").Scan(t.Context(), &ids); err != nil {
			t.Fatal(err)
		}
		if len(ids) != want {
			t.Fatalf("after batch %d: %s %v, want %d left", i+1, what, ids, want)
		}
	}
	return ids
}
