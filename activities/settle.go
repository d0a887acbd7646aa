package activities

import (
	"context"

	"github.com/webhookd/webhookd/model"
)

// SettleInput names a delivery and the state its workflow is in.
type SettleInput struct {
	DeliveryID int64
	State      string
}

// SettleClaim gives a delivery claimed by a retry that its workflow found already answered the
// workflow's state back (model.SettleClaim). Running it twice is harmless.
func (a *Activities) SettleClaim(ctx context.Context, in SettleInput) error {
	return model.SettleClaim(ctx, a.DB, in.DeliveryID, in.State)
}
