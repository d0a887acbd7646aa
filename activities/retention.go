package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/webhookd/webhookd/model"
)

// PurgeInput names one batch of a retention pass.
type PurgeInput struct {
	// Before is the cutoff: what expired before it goes (the pass's start minus WEBHOOKD_RETENTION).
	// The workflow fixes it once per pass, so every batch deletes by the same rule.
	Before time.Time
	// After is where the pass has got to: the previous batch's Next, zero for the first.
	After model.PurgeCursor
	// Limit bounds the deliveries (with their attempts) and the events this batch examines.
	Limit int
}

// PurgeExpired runs one batch of a retention pass (model.PurgeExpired, then
// model.PurgePortalAccess, model.PurgeAudit and model.PurgeReplays). Running it twice is harmless: a row deleted once is not found again,
// and a row kept is kept again.
func (a *Activities) PurgeExpired(ctx context.Context, in PurgeInput) (model.PurgeBatch, error) {
	if in.Limit <= 0 || in.Before.IsZero() {
		return model.PurgeBatch{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("purge input %+v: want a cutoff and a positive limit", in),
			ErrTypeBadInput, nil)
	}
	b, err := model.PurgeExpired(ctx, a.DB, in.Before, in.After, in.Limit)
	if err != nil {
		return b, err
	}
	if b.Purged != (model.Purged{}) {
		activity.GetLogger(ctx).Info("purged expired rows", "before", in.Before, "attempts", b.Attempts,
			"deliveries", b.Deliveries, "events", b.Events)
	}
	// The owner's portal sessions and links that ended before the cutoff go by the same rule,
	// as many per batch; they open nothing any more.
	p, err := model.PurgePortalAccess(ctx, a.DB, in.Before, in.Limit)
	if err != nil {
		return b, err
	}
	if p != (model.PortalRevoked{}) {
		activity.GetLogger(ctx).Info("purged ended portal access", "before", in.Before, "sessions", p.Sessions, "links", p.Links)
	}
	// The audit log's entries too, as many per batch (docs/api.md, "Audit log").
	n, err := model.PurgeAudit(ctx, a.DB, in.Before, in.Limit)
	if err != nil {
		return b, err
	}
	if n > 0 {
		activity.GetLogger(ctx).Info("purged audit entries", "before", in.Before, "entries", n)
	}
	// And the replays that ended before it, as many per batch (docs/api.md, "Replays").
	if n, err = model.PurgeReplays(ctx, a.DB, in.Before, in.Limit); err != nil {
		return b, err
	}
	if n > 0 {
		activity.GetLogger(ctx).Info("purged ended replays", "before", in.Before, "replays", n)
	}
	return b, nil
}
