package model

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// OpenDeliveries returns the deliveries of a webhook that have not ended (neither delivered nor
// canceled): those whose workflows may still be running or waiting for a retry.
func OpenDeliveries(ctx context.Context, db bun.IDB, webhookID int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	err := selectRefs(db).Where("d.webhook_id = ?", webhookID).Where("d.state NOT IN (?)", bun.In([]string{DeliveryDelivered, DeliveryCanceled})).
		OrderExpr("d.id ASC").Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find open deliveries: %w", err)
	}
	return refs, nil
}

// CancelOpenDeliveries marks every delivery of a webhook that has not ended as canceled, when the
// webhook is deleted.
func CancelOpenDeliveries(ctx context.Context, db bun.IDB, webhookID int64) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryCanceled).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("webhook_id = ?", webhookID).Where("state NOT IN (?)", bun.In([]string{DeliveryDelivered, DeliveryCanceled})).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel open deliveries: %w", err)
	}
	return nil
}

// CancelDelivery marks one delivery canceled unless it was delivered, as its canceled workflow
// ends. Running it twice is harmless.
func CancelDelivery(ctx context.Context, db bun.IDB, deliveryID int64) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryCanceled).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("id = ?", deliveryID).Where("state <> ?", DeliveryDelivered).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel delivery: %w", err)
	}
	return nil
}

// DeliveryAttempts returns how many attempts each of the given deliveries has made.
func DeliveryAttempts(ctx context.Context, db bun.IDB, deliveryIDs []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(deliveryIDs))
	if len(deliveryIDs) == 0 {
		return out, nil
	}
	var rows []Delivery
	if err := db.NewSelect().Model(&rows).Column("id", "attempts").Where("id IN (?)", bun.In(deliveryIDs)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("count delivery attempts: %w", err)
	}
	for _, d := range rows {
		out[d.ID] = d.Attempts
	}
	return out, nil
}
