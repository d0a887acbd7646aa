package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestChangeRollsBackItsEvents: an event emitted inside a domain change's transaction disappears
// with it when the transaction rolls back: no event, no delivery, nothing to dispatch.
func TestChangeRollsBackItsEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "rollback@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		now := model.Now()
		w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://r.example.com/", EventType: "campaign.updated",
			Status: model.StatusPending, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
		if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
			t.Fatal(err)
		}
		failed := errors.New("the domain change failed after publishing")
		_, err = model.Change(ctx, db, nil, func(ctx context.Context, cs *model.ChangeSet) error {
			res, err := cs.Emit(ctx, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.updated", Data: `{}`})
			if err != nil {
				return err
			}
			if len(res.Deliveries) != 1 {
				t.Errorf("inside the transaction: %d deliveries, want 1", len(res.Deliveries))
			}
			return failed
		})
		if !errors.Is(err, failed) {
			t.Fatalf("transaction error = %v", err)
		}
		for _, table := range []string{"events", "deliveries"} {
			n, err := db.NewSelect().Table(table).Count(ctx)
			if err != nil || n != 0 {
				t.Fatalf("%s after rollback: %d rows, %v", table, n, err)
			}
		}
	})
}
