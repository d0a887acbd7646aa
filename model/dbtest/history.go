package dbtest

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// History writes n events of w's type for w's account, spread evenly over the span that ends at
// end, each with one delivery to w of three attempts five minutes apart: a third of the deliveries
// delivered on the third attempt, a third exhausted, a third still retrying. It writes in bulk
// (hundreds of rows per statement), for benchmarks that need a webhook with a long history.
func History(ctx context.Context, db *model.DB, w *model.Webhook, n int, span time.Duration, end time.Time) error {
	const chunk = 500
	start := end.Add(-span)
	class := "http_status"
	for i := 0; i < n; i += chunk {
		events := make([]model.Event, min(chunk, n-i))
		for j := range events {
			at := start.Add(time.Duration(i+j) * span / time.Duration(n))
			events[j] = model.Event{AccountID: w.AccountID, Variant: w.Variant, EventType: w.EventType, Data: `{"n":1}`, Version: 1, OccurredAt: at, CreatedAt: at}
		}
		if _, err := db.NewInsert().Model(&events).Returning("id").Exec(ctx); err != nil {
			return err
		}
		deliveries := make([]model.Delivery, len(events))
		for j, ev := range events {
			state := []string{model.DeliveryDelivered, model.DeliveryExhausted, model.DeliveryRetrying}[j%3]
			deliveries[j] = model.Delivery{EventID: ev.ID, WebhookID: w.ID, State: state, Attempts: 3,
				CreatedAt: ev.CreatedAt, UpdatedAt: ev.CreatedAt.Add(20 * time.Minute)}
		}
		if _, err := db.NewInsert().Model(&deliveries).Returning("id").Exec(ctx); err != nil {
			return err
		}
		attempts := make([]model.Attempt, 0, 3*len(deliveries))
		for _, d := range deliveries {
			for k := 1; k <= 3; k++ {
				a := model.Attempt{DeliveryID: d.ID, Attempt: k, URL: w.URL, StartedAt: d.CreatedAt.Add(time.Duration(k) * 5 * time.Minute)}
				if k < 3 || d.State != model.DeliveryDelivered {
					a.ErrorClass = &class
				}
				attempts = append(attempts, a)
			}
		}
		if _, err := db.NewInsert().Model(&attempts).Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// SetDeliveryState puts a delivery in state directly, whatever state it is in: a test's setup of a
// case, never a transition of model's lifecycle (model/lifecycle.go writes those).
func SetDeliveryState(ctx context.Context, db bun.IDB, deliveryID int64, state string) error {
	_, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", state).Where("id = ?", deliveryID).Exec(ctx)
	return err
}
