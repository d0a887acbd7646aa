package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// PublishWebsiteInput names a scheduled publication.
type PublishWebsiteInput struct {
	WebsiteID   int64
	ScheduledAt time.Time
}

// PublishScheduledWebsite publishes a website whose scheduled time has come, with its
// website.published event in the same change (model.Change), and returns the event's id for the workflow to
// start its deliveries (0 when it has none). It does nothing when the schedule is no longer the website's
// (rescheduled, published by hand, archived): a stale timer never publishes, and the id is 0.
func (a *Activities) PublishScheduledWebsite(ctx context.Context, in PublishWebsiteInput) (int64, error) {
	var res *model.PublishResult
	cs, err := model.Change(ctx, a.DB, func(ctx context.Context, cs *model.ChangeSet) error {
		w, err := sources.GetWebsite(ctx, cs.Tx, 0, in.WebsiteID, true)
		if errors.Is(err, model.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if w.Status != sources.WebsiteDraft || w.ScheduledAt == nil || !w.ScheduledAt.Equal(in.ScheduledAt) {
			activity.GetLogger(ctx).Info("stale website schedule ignored", "website", w.ID, "status", w.Status)
			return nil
		}
		ev, err := w.Publish(a.SiteBaseURL, true)
		if err != nil {
			return err
		}
		if err := sources.SaveWebsite(ctx, cs.Tx, w); err != nil {
			return err
		}
		res, err = cs.Emit(ctx, *ev)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("publish website %d: %w", in.WebsiteID, err)
	}
	if a.FilterSkips != nil {
		for v, n := range model.Filtered(cs.Results) {
			a.FilterSkips.WithLabelValues(string(v)).Add(float64(n))
		}
	}
	if res == nil || len(res.Deliveries) == 0 {
		return 0, nil
	}
	return res.Event.ID, nil
}
