package sources

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// MetricSignups is counted by webhookd itself: every lead and pre-save adds one.
const MetricSignups = "signups"

// CountedMetrics are the metrics a client counts through the analytics intake: every metric of
// AnalyticsMetrics but signups, which webhookd counts from leads and pre-saves.
var CountedMetrics = slices.DeleteFunc(slices.Clone(AnalyticsMetrics), func(m string) bool { return m == MetricSignups })

// Threshold is an operator-set value of a website metric whose crossing emits analytics.threshold.
type Threshold struct {
	bun.BaseModel `bun:"table:thresholds"`

	ID        int64      `bun:"id,pk,autoincrement"`
	WebsiteID int64      `bun:"website_id,notnull"`
	Metric    string     `bun:"metric,notnull"`
	Value     int64      `bun:"value,notnull"`
	CrossedAt *time.Time `bun:"crossed_at"`
	CreatedAt time.Time  `bun:"created_at,notnull"`
}

// setThreshold adds a threshold. One the counter has already reached is recorded as crossed: it
// marks a crossing to come, and that one has passed.
func setThreshold(ctx context.Context, db bun.IDB, websiteID int64, metric string, value int64) (*Threshold, error) {
	th := &Threshold{WebsiteID: websiteID, Metric: metric, Value: value, CreatedAt: model.Now()}
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := GetWebsite(ctx, tx, 0, websiteID, true); err != nil {
			return err
		}
		var current int64
		err := tx.NewSelect().Table("analytics_counters").Column("value").
			Where("website_id = ?", websiteID).Where("metric = ?", metric).Scan(ctx, &current)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read counter: %w", err)
		}
		if current >= value {
			th.CrossedAt = &th.CreatedAt
		}
		if _, err := tx.NewInsert().Model(th).On("CONFLICT (website_id, metric, value) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("insert threshold: %w", err)
		}
		return nil
	})
	return th, err
}

// listThresholds returns the thresholds of one website, or of all when websiteID is 0.
func listThresholds(ctx context.Context, db bun.IDB, websiteID int64) ([]Threshold, error) {
	var ths []Threshold
	q := db.NewSelect().Model(&ths).OrderExpr("website_id, metric, value")
	if websiteID != 0 {
		q = q.Where("website_id = ?", websiteID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list thresholds: %w", err)
	}
	return ths, nil
}

// AddToCounter adds n to a website's metric in db (the caller's transaction) and returns the new
// value with one analytics.threshold event per threshold this addition crossed. The counter row
// stays locked until the transaction ends and each threshold is claimed with a compare-and-set, so
// concurrent additions across a threshold emit its event exactly once.
func AddToCounter(ctx context.Context, db bun.IDB, w *Website, metric string, n int64) (int64, []model.NewEvent, error) {
	var value int64
	_, err := db.NewRaw(`INSERT INTO analytics_counters (website_id, metric, value) VALUES (?, ?, ?)
		ON CONFLICT (website_id, metric) DO UPDATE SET value = analytics_counters.value + EXCLUDED.value
		RETURNING value`, w.ID, metric, n).Exec(ctx, &value)
	if err != nil {
		return 0, nil, fmt.Errorf("add to counter: %w", err)
	}
	var crossed []int64
	err = db.NewRaw(`UPDATE thresholds SET crossed_at = ? WHERE website_id = ? AND metric = ? AND crossed_at IS NULL AND value <= ?
		RETURNING value`, model.Now(), w.ID, metric, value).Scan(ctx, &crossed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("claim thresholds: %w", err)
	}
	events := make([]model.NewEvent, 0, len(crossed))
	for _, threshold := range crossed {
		data, err := canonicalData(thresholdData{w.ID, w.BrandID, metric, value, threshold, "reached"})
		if err != nil {
			return 0, nil, err
		}
		events = append(events, model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: "analytics.threshold", Data: data})
	}
	return value, events, nil
}
