package sources_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// TestThresholdFiresOnceUnderConcurrency: 1,000 concurrent increments across a threshold emit
// exactly one analytics.threshold event, carrying the counter at the crossing.
func TestThresholdFiresOnceUnderConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "site@example.com", "")
		now := model.Now()
		w := &sources.Website{AccountID: acc.ID, BrandID: 3, Slug: "s", Status: sources.WebsitePublished, CreatedAt: now, UpdatedAt: now}
		if err := sources.InsertWebsite(ctx, db, w); err != nil {
			t.Fatal(err)
		}
		for _, v := range []int64{500, 2000} {
			if _, err := sources.SetThreshold(ctx, db, w.ID, "pageViews", v); err != nil {
				t.Fatal(err)
			}
		}
		const n = 1000
		var wg sync.WaitGroup
		var mu sync.Mutex
		var events []model.NewEvent
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					_, evs, err := sources.AddToCounter(ctx, tx, w, "pageViews", 1)
					if err == nil {
						mu.Lock()
						events = append(events, evs...)
						mu.Unlock()
					}
					return err
				})
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("increment: %v", err)
		}
		if len(events) != 1 {
			t.Fatalf("%d threshold events for %d increments across 500, want exactly 1", len(events), n)
		}
		want := `"metric":"pageViews","value":500,"threshold":500,"thresholdType":"reached"}`
		if !strings.HasSuffix(events[0].Data, want) {
			t.Fatalf("event data = %s, want ...%s", events[0].Data, want)
		}
		var value int64
		if err := db.NewSelect().Table("analytics_counters").Column("value").Where("website_id = ?", w.ID).Scan(ctx, &value); err != nil || value != n {
			t.Fatalf("counter = %d, %v; want %d", value, err, n)
		}
		// A threshold set below the current value has passed already and never fires.
		if th, err := sources.SetThreshold(ctx, db, w.ID, "pageViews", 800); err != nil || th.CrossedAt == nil {
			t.Fatalf("late threshold = %+v, %v", th, err)
		}
		if _, evs, err := sources.AddToCounter(ctx, db, w, "pageViews", 1); err != nil || len(evs) != 0 {
			t.Fatalf("after the crossing: %d events, %v", len(evs), err)
		}
	})
}
