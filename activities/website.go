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

// errStaleSchedule ends the change of a publication whose schedule is no longer the website's.
var errStaleSchedule = errors.New("stale schedule")

// PublishScheduledWebsite publishes a website whose scheduled time has come, with its
// website.published event in the same change (model.Change), and returns the event's id for the workflow to
// start its deliveries (0 when it has none). It does nothing when the schedule is no longer the website's
// (rescheduled, published by hand, archived): a stale timer never publishes, and the id is 0.
func (a *Activities) PublishScheduledWebsite(ctx context.Context, in PublishWebsiteInput) (int64, error) {
	cs, err := model.Change(ctx, a.DB, a.Versions, func(ctx context.Context, cs *model.ChangeSet) error {
		_, _, err := sources.MoveWebsite(ctx, cs, 0, in.WebsiteID, func(w *sources.Website) (*model.NewEvent, error) {
			if w.Status != sources.WebsiteDraft || w.ScheduledAt == nil || !w.ScheduledAt.Equal(in.ScheduledAt) {
				activity.GetLogger(ctx).Info("stale website schedule ignored", "website", w.ID, "status", w.Status)
				return nil, errStaleSchedule
			}
			return w.Publish(a.SiteBaseURL, true)
		})
		if errors.Is(err, errStaleSchedule) || errors.Is(err, model.ErrNotFound) {
			return nil
		}
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
	for _, res := range cs.Results {
		if a.FilterOverruns != nil {
			a.FilterOverruns.WithLabelValues(string(res.Event.Variant)).Add(float64(len(res.Overran)))
		}
		// A publication is one event, rare: each webhook it reached unjudged is logged with it.
		for _, id := range res.Overran {
			activity.GetLogger(ctx).Warn("payload filter ran out of its budget; the event reached the webhook unjudged",
				"webhook", id, "account", res.Event.AccountID, "eventType", res.Event.EventType, "event", res.Event.ID)
		}
	}
	// The change emitted the website.published event, or nothing when the schedule was stale.
	if len(cs.Results) == 0 || len(cs.Results[0].Deliveries) == 0 {
		return 0, nil
	}
	return cs.Results[0].Event.ID, nil
}
