package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// OpenDeliveries returns the deliveries of a webhook that have not ended (neither delivered nor
// canceled): those whose workflows may still be running or waiting for a retry.
func OpenDeliveries(ctx context.Context, db bun.IDB, webhookID int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	err := selectRefs(db).Where("d.webhook_id = ?", webhookID).Where("d.state IN (?)", bun.List(OpenStates)).
		OrderExpr("d.id ASC").Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find open deliveries: %w", err)
	}
	return refs, nil
}

// UnderwayDeliveries returns a webhook's deliveries whose schedule is under way (pending,
// delivering or retrying): those with an attempt held back for its turn at the receiver among them.
func UnderwayDeliveries(ctx context.Context, db bun.IDB, webhookID int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	err := selectRefs(db).Where("d.webhook_id = ?", webhookID).Where("d.state IN (?)", bun.List(UnderwayStates)).
		OrderExpr("d.id ASC").Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find deliveries under way: %w", err)
	}
	return refs, nil
}

// WebhookDeliveryRef returns the reference of one delivery of a webhook, for a retry of it alone,
// or ErrNotFound when the webhook has no delivery of that id.
func WebhookDeliveryRef(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (DeliveryRef, error) {
	refs := make([]DeliveryRef, 0, 1)
	if err := selectRefs(db).Where("d.id = ?", deliveryID).Where("d.webhook_id = ?", webhookID).Scan(ctx, &refs); err != nil {
		return DeliveryRef{}, fmt.Errorf("find delivery: %w", err)
	}
	if len(refs) == 0 {
		return DeliveryRef{}, ErrNotFound
	}
	return refs[0], nil
}

// Recovery selects the deliveries a recovery retries: those of one webhook, created in
// [Since, Until), that have not succeeded: exhausted, or still waiting in their schedule. UpTo, when
// set, bounds their ids, so that a recovery retries what was there when it was asked for and not
// the deliveries that arrive while it runs.
type Recovery struct {
	WebhookID int64
	Since     time.Time
	Until     time.Time
	UpTo      int64
}

// Check refuses a window that is empty, starts in the future or leaves the years 0001 to 9999, with
// a *DataError naming the field.
func (r Recovery) Check(now time.Time) error {
	switch {
	case !TimeInRange(r.Since):
		return &DataError{Field: "since", Reason: "must be in the years 0001 to 9999 (UTC)"}
	case !TimeInRange(r.Until):
		return &DataError{Field: "until", Reason: "must be in the years 0001 to 9999 (UTC)"}
	case !r.Since.Before(r.Until):
		return &DataError{Field: "since", Reason: "must be before until"}
	case r.Since.After(now):
		return &DataError{Field: "since", Reason: "must not be in the future"}
	}
	return nil
}

func (r Recovery) where(q *bun.SelectQuery) *bun.SelectQuery {
	q = q.Where("d.webhook_id = ?", r.WebhookID).Where("d.state IN (?)", bun.List(RecoverableStates)).
		Where("d.created_at >= ?", r.Since).Where("d.created_at < ?", r.Until)
	if r.UpTo > 0 {
		q = q.Where("d.id <= ?", r.UpTo)
	}
	return q
}

// CountRecoverable counts the deliveries r selects and returns the largest of their ids, the
// recovery's UpTo (0 when there are none).
func CountRecoverable(ctx context.Context, db bun.IDB, r Recovery) (count int, upTo int64, err error) {
	var row struct {
		N   int   `bun:"n"`
		Max int64 `bun:"max_id"`
	}
	q := db.NewSelect().TableExpr("deliveries AS d").ColumnExpr("COUNT(*) AS n, COALESCE(MAX(d.id), 0) AS max_id")
	if err := r.where(q).Scan(ctx, &row); err != nil {
		return 0, 0, fmt.Errorf("count recoverable deliveries: %w", err)
	}
	return row.N, row.Max, nil
}

// RecoverableDeliveries returns up to limit of the deliveries r selects with ids above after, in id
// order: one batch of a recovery.
func RecoverableDeliveries(ctx context.Context, db bun.IDB, r Recovery, after, limit int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	if err := r.where(selectRefs(db)).Where("d.id > ?", after).OrderExpr("d.id ASC").Limit(limit).Scan(ctx, &refs); err != nil {
		return nil, fmt.Errorf("find recoverable deliveries: %w", err)
	}
	return refs, nil
}
