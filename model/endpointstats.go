package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// HourBucket counts one webhook's delivery attempts that started within one UTC hour.
type HourBucket struct {
	// Hour is the start of the hour, in UTC.
	Hour time.Time
	// Delivered counts the attempts that succeeded.
	Delivered int
	// Retried counts the attempts that failed and were, or will be, followed by another attempt
	// of the same delivery.
	Retried int
	// Failed counts the deliveries that failed for good: it counts the attempt that exhausted
	// its delivery's schedule.
	Failed int
}

// Total is every attempt counted in the bucket.
func (b HourBucket) Total() int { return b.Delivered + b.Retried + b.Failed }

// MaxHourBuckets bounds the window EndpointHourly answers for: 31 days of hours.
const MaxHourBuckets = 31 * 24

// EndpointHourly counts the attempts of one live webhook of an account per UTC hour, for a chart of
// when an endpoint started failing. It returns one bucket per hour from the hour holding since up to
// the hour holding until, with until itself excluded (an until on the hour ends the window there),
// empty hours included, in time order. Another account's webhook, or a deleted one, gives
// ErrNotFound; a window of more than MaxHourBuckets hours a *DataError naming since.
//
// Each attempt counts once, in the hour its started_at falls in:
//   - delivered: the attempt succeeded (error_class IS NULL: only a failure records a class);
//   - failed: the attempt failed, is its delivery's last (attempt = deliveries.attempts, the
//     highest number recorded) and the delivery is exhausted. This is one per delivery that
//     failed for good, drawn when its schedule ran out. A manual retry that later succeeds makes
//     the delivery's last attempt a new one, and the old one moves to retried;
//   - retried: every other failed attempt, that is one a later attempt followed, or one whose
//     delivery still waits in its schedule (retrying) or is being tried again (delivering,
//     pending). The last failed attempt of a canceled delivery counts nowhere: nothing retried
//     it and its schedule did not run out, the webhook was deleted or the delivery canceled.
//
// The query walks the webhook's deliveries by deliveries_webhook (webhook_id, id), skips those not
// updated since the window began (every attempt sets updated_at after it started, so a delivery
// with an attempt in the window was updated within it), and reads their attempts by
// delivery_attempts_delivery_attempt (delivery_id, attempt). Its cost grows with the webhook's
// retained deliveries, and with the attempts in the window only for the recent ones. Counting is
// done by the database, grouped by the hour number since the Unix epoch, so at most
// MaxHourBuckets rows come back.
func EndpointHourly(ctx context.Context, db bun.IDB, accountID, webhookID int64, since, until time.Time) ([]HourBucket, error) {
	exists, err := db.NewSelect().Model((*Webhook)(nil)).Where("id = ?", webhookID).Where("account_id = ?", accountID).Exists(ctx)
	if err != nil {
		return nil, fmt.Errorf("load webhook: %w", err)
	}
	if !exists {
		return nil, ErrNotFound
	}
	first := since.UTC().Truncate(time.Hour)
	until = until.UTC()
	n := 0
	if until.After(first) {
		n = int((until.Sub(first) + time.Hour - 1) / time.Hour)
	}
	if n > MaxHourBuckets {
		return nil, &DataError{Field: "since", Reason: fmt.Sprintf("the window must span at most %d hours", MaxHourBuckets)}
	}
	buckets := make([]HourBucket, n)
	for i := range buckets {
		buckets[i].Hour = first.Add(time.Duration(i) * time.Hour)
	}
	if n == 0 {
		return buckets, nil
	}
	// The hour number since the epoch: both dialects read their own timestamps (SQLite's text,
	// with its zone, PostgreSQL's timestamptz) as UTC here.
	hour := "CAST(strftime('%s', a.started_at) AS INTEGER) / 3600"
	if IsPostgres(db) {
		hour = "CAST(floor(EXTRACT(EPOCH FROM a.started_at) / 3600) AS BIGINT)"
	}
	const last = "a.error_class IS NOT NULL AND a.attempt = d.attempts AND d.state = ?"
	var rows []struct {
		Hour      int64 `bun:"hour"`
		Delivered int   `bun:"delivered"`
		Retried   int   `bun:"retried"`
		Failed    int   `bun:"failed"`
	}
	err = db.NewSelect().TableExpr("deliveries AS d").Join("JOIN delivery_attempts AS a ON a.delivery_id = d.id").
		ColumnExpr(hour+" AS hour").
		ColumnExpr("SUM(CASE WHEN a.error_class IS NULL THEN 1 ELSE 0 END) AS delivered").
		ColumnExpr("SUM(CASE WHEN "+last+" THEN 1 ELSE 0 END) AS failed", DeliveryExhausted).
		ColumnExpr("SUM(CASE WHEN a.error_class IS NOT NULL AND NOT ("+last+" OR "+last+") THEN 1 ELSE 0 END) AS retried",
			DeliveryExhausted, DeliveryCanceled).
		Where("d.webhook_id = ?", webhookID).
		Where("d.updated_at >= ?", first).
		Where("a.started_at >= ?", first).Where("a.started_at < ?", until).
		GroupExpr("1").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count attempts per hour: %w", err)
	}
	base := first.Unix() / 3600
	for _, r := range rows {
		i := r.Hour - base
		if i < 0 || i >= int64(n) {
			return nil, fmt.Errorf("count attempts per hour: hour %d outside the window", r.Hour)
		}
		b := &buckets[i]
		b.Delivered, b.Retried, b.Failed = r.Delivered, r.Retried, r.Failed
	}
	return buckets, nil
}
