package model

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/input"
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
	hours, err := EndpointsHourly(ctx, db, accountID, []int64{webhookID}, since, until)
	if err != nil {
		return nil, err
	}
	buckets, ok := hours[webhookID]
	if !ok {
		return nil, ErrNotFound
	}
	return buckets, nil
}

// EndpointsHourly is EndpointHourly for many webhooks of an account at once, in one query over
// their attempts (a list page's webhooks): each live webhook of the account among webhookIDs gets
// its buckets; another account's webhook, or a deleted one, is absent from the answer.
func EndpointsHourly(ctx context.Context, db bun.IDB, accountID int64, webhookIDs []int64, since, until time.Time) (map[int64][]HourBucket, error) {
	out := make(map[int64][]HourBucket, len(webhookIDs))
	if len(webhookIDs) == 0 {
		return out, nil
	}
	var live []int64
	err := db.NewSelect().Model((*Webhook)(nil)).Column("id").Where("id IN (?)", bun.List(webhookIDs)).
		Where("account_id = ?", accountID).Scan(ctx, &live)
	if err != nil {
		return nil, fmt.Errorf("load webhook: %w", err)
	}
	if len(live) == 0 {
		return out, nil
	}
	first := since.UTC().Truncate(time.Hour)
	until = until.UTC()
	n := 0
	if until.After(first) {
		n = int((until.Sub(first) + time.Hour - 1) / time.Hour)
	}
	if n > MaxHourBuckets {
		return nil, &input.DataError{Field: "since", Reason: fmt.Sprintf("the window must span at most %d hours", MaxHourBuckets)}
	}
	for _, id := range live {
		buckets := make([]HourBucket, n)
		for i := range buckets {
			buckets[i].Hour = first.Add(time.Duration(i) * time.Hour)
		}
		out[id] = buckets
	}
	if n == 0 {
		return out, nil
	}
	// The hour number since the epoch: both dialects read their own timestamps (SQLite's text,
	// with its zone, PostgreSQL's timestamptz) as UTC here.
	hour := "CAST(strftime('%s', a.started_at) AS INTEGER) / 3600"
	if IsPostgres(db) {
		hour = "CAST(floor(EXTRACT(EPOCH FROM a.started_at) / 3600) AS BIGINT)"
	}
	const last = "a.error_class IS NOT NULL AND a.attempt = d.attempts AND d.state = ?"
	var rows []struct {
		WebhookID int64 `bun:"webhook_id"`
		Hour      int64 `bun:"hour"`
		Delivered int   `bun:"delivered"`
		Retried   int   `bun:"retried"`
		Failed    int   `bun:"failed"`
	}
	err = windowAttempts(db, live, first, until).
		ColumnExpr("d.webhook_id").
		ColumnExpr(hour+" AS hour").
		ColumnExpr("SUM(CASE WHEN a.error_class IS NULL THEN 1 ELSE 0 END) AS delivered").
		ColumnExpr("SUM(CASE WHEN "+last+" THEN 1 ELSE 0 END) AS failed", DeliveryExhausted).
		ColumnExpr("SUM(CASE WHEN a.error_class IS NOT NULL AND NOT ("+last+" OR "+last+") THEN 1 ELSE 0 END) AS retried",
			DeliveryExhausted, DeliveryCanceled).
		GroupExpr("1, 2").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count attempts per hour: %w", err)
	}
	base := first.Unix() / 3600
	for _, r := range rows {
		i := r.Hour - base
		if i < 0 || i >= int64(n) {
			return nil, fmt.Errorf("count attempts per hour: hour %d outside the window", r.Hour)
		}
		b := &out[r.WebhookID][i]
		b.Delivered, b.Retried, b.Failed = r.Delivered, r.Retried, r.Failed
	}
	return out, nil
}

// windowAttempts selects the attempts of webhooks that started in [since, until), through the
// indexes EndpointHourly walks: the webhooks' deliveries updated since the window began (an attempt
// sets its delivery's updated_at after it started), and their attempts.
func windowAttempts(db bun.IDB, webhookIDs []int64, since, until time.Time) *bun.SelectQuery {
	return db.NewSelect().TableExpr("deliveries AS d").Join("JOIN delivery_attempts AS a ON a.delivery_id = d.id").
		Where("d.webhook_id IN (?)", bun.List(webhookIDs)).
		Where("d.updated_at >= ?", since).
		Where("a.started_at >= ?", since).Where("a.started_at < ?", until)
}

// checkWindow refuses a window longer than EndpointHourly answers for, with the same *DataError.
func checkWindow(since, until time.Time) error {
	if until.Sub(since) > MaxHourBuckets*time.Hour {
		return &input.DataError{Field: "since", Reason: fmt.Sprintf("the window must span at most %d hours", MaxHourBuckets)}
	}
	return nil
}

// Latency sums up how long a webhook's attempts took, in milliseconds, by nearest rank: P50 is
// the smallest latency that at least half of the attempts did not exceed, P95 the same for 95 %.
type Latency struct {
	// Attempts is how many attempts the percentiles were taken over.
	Attempts int
	P50, P95 int64
}

// nearestRank is the 1-based rank of the p-th percentile (0 < p <= 100) among n ordered values:
// ceil(p/100 * n), in integers so that 95 % of 20 is exactly the 19th.
func nearestRank(p, n int) int {
	return max(1, (p*n+99)/100)
}

// EndpointLatency takes the percentiles of the latencies of one webhook's attempts that started in
// [since, until), every attempt counted whatever its outcome; nil when there were none. The window
// is bounded as EndpointHourly's is (a *DataError naming since beyond MaxHourBuckets hours), and
// the caller has checked that the webhook is the caller's.
//
// The percentiles are exact on both dialects without a percentile function: the attempts are
// counted, then each percentile is the one row at its nearest rank (ORDER BY latency_ms LIMIT 1
// OFFSET rank-1). At most three rows come back however many attempts the window holds; the
// database orders the window's latencies, which cost grows with the attempts in the window as
// EndpointHourly's count does (the window is at most 31 days).
func EndpointLatency(ctx context.Context, db bun.IDB, webhookID int64, since, until time.Time) (*Latency, error) {
	if err := checkWindow(since, until); err != nil {
		return nil, err
	}
	var n int
	if err := windowAttempts(db, []int64{webhookID}, since, until).ColumnExpr("COUNT(*)").Scan(ctx, &n); err != nil {
		return nil, fmt.Errorf("count attempts: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	l := &Latency{Attempts: n}
	for _, pick := range []struct {
		p  int
		to *int64
	}{{50, &l.P50}, {95, &l.P95}} {
		err := windowAttempts(db, []int64{webhookID}, since, until).ColumnExpr("a.latency_ms").
			OrderExpr("a.latency_ms").Limit(1).Offset(int64(nearestRank(pick.p, n)-1)).Scan(ctx, pick.to)
		if err != nil {
			return nil, fmt.Errorf("latency percentile %d: %w", pick.p, err)
		}
	}
	return l, nil
}

// AttemptFailure is what a failed attempt recorded: when it started, its error class (the
// delivery client's words: timeout, http_status, ...), the receiver's status code when it
// answered, and the error's text.
type AttemptFailure struct {
	StartedAt  time.Time `bun:"started_at"`
	ErrorClass string    `bun:"error_class"`
	StatusCode *int      `bun:"status_code"`
	Error      *string   `bun:"error"`
}

// LastFailedAttempt is the failure of one webhook's last failed attempt that started in
// [since, until) (the latest start, then the highest id), or nil when none failed there. The
// caller has checked that the webhook is the caller's.
func LastFailedAttempt(ctx context.Context, db bun.IDB, webhookID int64, since, until time.Time) (*AttemptFailure, error) {
	if err := checkWindow(since, until); err != nil {
		return nil, err
	}
	var f AttemptFailure
	err := windowAttempts(db, []int64{webhookID}, since, until).
		ColumnExpr("a.started_at, a.error_class, a.status_code, a.error").
		Where("a.error_class IS NOT NULL").
		OrderExpr("a.started_at DESC, a.id DESC").Limit(1).Scan(ctx, &f)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last failed attempt: %w", err)
	}
	return &f, nil
}
