package model_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// BenchmarkDeliveryStatements runs one delivery's statements per iteration on SQLite: its event
// (ChangeSet.Emit, in a domain change's transaction as the API runs it), its attempt's target
// (LoadDeliveryTarget) and its outcome (RecordAttempt): what statement parsing cost webhookd per
// delivery.
func BenchmarkDeliveryStatements(b *testing.B) {
	db := dbtest.SQLite(b)
	ctx := context.Background()
	_, acc, err := model.CreateAPIKey(ctx, db, "bench-delivery@example.com", "")
	if err != nil {
		b.Fatal(err)
	}
	newWebhook(b, db, acc.ID, model.VariantB, "lead.captured")
	ne := model.NewEvent{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured", Data: `{"lead":1}`}
	for b.Loop() {
		var res *model.PublishResult
		if _, err := model.Change(ctx, db, nil, func(ctx context.Context, cs *model.ChangeSet) (err error) {
			res, err = cs.Emit(ctx, ne)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if len(res.Deliveries) != 1 {
			b.Fatalf("%d deliveries, want 1", len(res.Deliveries))
		}
		target, err := model.LoadDeliveryTarget(ctx, db, res.Deliveries[0].ID)
		if err != nil {
			b.Fatal(err)
		}
		o := model.AttemptOutcome{Success: true}
		o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt = res.Deliveries[0].ID, 1, target.Webhook.URL, model.Now()
		if _, err := model.RecordAttempt(ctx, db, &target.Webhook, o); err != nil {
			b.Fatal(err)
		}
	}
}
