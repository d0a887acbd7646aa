package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// DeliveryView is a delivery with its event type and attempts, as the REST API lists it. GetDelivery
// also fills in the event's data and time, from which the body is rebuilt.
type DeliveryView struct {
	Delivery
	EventType       string    `bun:"event_type"`
	EventData       string    `bun:"event_data"`
	EventOccurredAt time.Time `bun:"event_occurred_at"`
	Log             []Attempt `bun:"-"`
}

// ListDeliveries returns one page of a webhook's deliveries, newest first, with their attempts.
func ListDeliveries(ctx context.Context, db bun.IDB, webhookID, before int64, limit int64) ([]DeliveryView, error) {
	var views []DeliveryView
	q := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		ColumnExpr("d.*, e.event_type").Where("d.webhook_id = ?", webhookID).OrderExpr("d.id DESC").Limit(limit)
	if before > 0 {
		q = q.Where("d.id < ?", before)
	}
	if err := q.Scan(ctx, &views); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return views, attachAttempts(ctx, db, views)
}

// GetDelivery returns one delivery of a webhook with its event and attempts, or ErrNotFound when
// the webhook has no delivery of that id.
func GetDelivery(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (*DeliveryView, error) {
	views := make([]DeliveryView, 0, 1)
	err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		ColumnExpr("d.*, e.event_type, e.data AS event_data, e.occurred_at AS event_occurred_at").
		Where("d.id = ?", deliveryID).Where("d.webhook_id = ?", webhookID).Scan(ctx, &views)
	if err != nil {
		return nil, fmt.Errorf("get delivery: %w", err)
	}
	if len(views) == 0 {
		return nil, ErrNotFound
	}
	return &views[0], attachAttempts(ctx, db, views)
}

// attachAttempts loads the attempts of views into their logs, in attempt order.
func attachAttempts(ctx context.Context, db bun.IDB, views []DeliveryView) error {
	if len(views) == 0 {
		return nil
	}
	ids := make([]int64, len(views))
	byID := make(map[int64]*DeliveryView, len(views))
	for i := range views {
		ids[i] = views[i].ID
		byID[views[i].ID] = &views[i]
	}
	var attempts []Attempt
	if err := db.NewSelect().Model(&attempts).Where("delivery_id IN (?)", bun.In(ids)).OrderExpr("delivery_id, attempt").Scan(ctx); err != nil {
		return fmt.Errorf("list attempts: %w", err)
	}
	for _, a := range attempts {
		v := byID[a.DeliveryID]
		v.Log = append(v.Log, a)
	}
	return nil
}
