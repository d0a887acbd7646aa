package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestMarksNoLingerBehindABacklog: a batch that is full already goes out at once, however
// long the linger: only a batch that could still grow waits for it.
func TestMarksNoLingerBehindABacklog(t *testing.T) {
	db := dbtest.SQLite(t)
	marks := &dispatch.Marks{DB: db, Linger: time.Hour}
	ids := make([]int64, 1000) // two full batches; no such deliveries, so the writes change nothing
	for i := range ids {
		ids[i] = int64(1_000_000 + i)
	}
	marks.Add(ids)
	deadline := time.Now().Add(time.Minute)
	for marks.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d ids still pending after a minute: the writer lingered behind a full batch", marks.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMarks: ids handed over from many requests at once are all marked by Wait, and the
// sweeper then finds none of them; the event rows hold their matched count as inserted.
func TestMarks(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "marks@example.com", "")
		for range 2 {
			now := model.Now()
			w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://example.com/hook", EventType: "campaign.created",
				Status: model.VariantA.InitialStatus(), Secret: "v1:unused", CreatedAt: now, UpdatedAt: now}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
		}
		marks := &dispatch.Marks{DB: db, Linger: dispatch.MarkLinger}
		const events = 40
		errs := make(chan error, events)
		for range events {
			go func() {
				res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`})
				if err == nil {
					ids := make([]int64, len(res.Deliveries))
					for i, d := range res.Deliveries {
						ids[i] = d.ID
					}
					marks.Add(ids)
				}
				errs <- err
			}()
		}
		for range events {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		marks.Wait()
		if refs, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Second), 100); err != nil || len(refs) != 0 {
			t.Fatalf("undispatched after Wait = %d, %v; want none", len(refs), err)
		}
		var wrong int
		if err := db.NewSelect().Model((*model.Event)(nil)).Where("account_id = ?", acc.ID).Where("matched <> 2").ColumnExpr("count(*)").Scan(ctx, &wrong); err != nil || wrong != 0 {
			t.Fatalf("events whose stored matched count is not 2: %d, %v", wrong, err)
		}
	})
}
