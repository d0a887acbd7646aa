package model

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// GetDelivery returns one delivery of a webhook with its event and attempts, or ErrNotFound when
// the webhook has no delivery of that id: the engine's own lookup, whatever the webhook's account
// (a client's goes through the use cases, scoped).
func GetDelivery(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (*DeliveryView, error) {
	page, err := ReadDeliveries(ctx, db, DeliveryQuery{WebhookID: webhookID, DeliveryID: deliveryID, Include: IncludeAttempts | IncludeEvent})
	if err != nil {
		return nil, fmt.Errorf("get delivery: %w", err)
	}
	if len(page.Views) == 0 {
		return nil, ErrNotFound
	}
	return &page.Views[0], nil
}
