package activities

import (
	"context"
	"errors"

	"github.com/webhookd/webhookd/model"
)

// CancelDelivery records that a delivery's workflow was canceled (its webhook was deleted): the
// delivery is canceled unless it was already delivered.
func (a *Activities) CancelDelivery(ctx context.Context, deliveryID int64) error {
	return model.CancelDelivery(ctx, a.DB, deliveryID)
}

// CancelIfWebhookGone cancels a delivery whose webhook was deleted and reports whether it did. The
// delivery workflow runs it when its retry window closes, for a delete that could not reach it.
func (a *Activities) CancelIfWebhookGone(ctx context.Context, deliveryID int64) (bool, error) {
	target, err := model.LoadDeliveryTarget(ctx, a.DB, deliveryID)
	if errors.Is(err, model.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if target.Webhook.DeletedAt == nil {
		return false, nil
	}
	return true, model.CancelDelivery(ctx, a.DB, deliveryID)
}
