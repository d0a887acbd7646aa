package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// The changes below are what the sources' use cases (Service) commit: each runs inside a change
// (model.ChangeSet, begun through the engine's one publish call, the Service's Publisher, or
// model.Change in the worker's scheduled publication) and emits the events it causes into it, so a
// change and its events commit together or not at all. What a change stores and emits is written
// here once.

// ErrEndBeforeStart refuses a campaign, or a change to one, whose end date would not be after its
// start.
var ErrEndBeforeStart = errors.New("endDate must be after startDate")

// NotPublishedError refuses a fan's event for a website that is not published.
type NotPublishedError struct{ Status string }

func (e *NotPublishedError) Error() string {
	return "the website is " + e.Status + "; fans reach published websites only"
}

// createCampaign stores camp and emits its campaign.created.
func createCampaign(ctx context.Context, cs *model.ChangeSet, camp *Campaign) error {
	if err := InsertCampaign(ctx, cs.Tx, camp); err != nil {
		return err
	}
	return emitCampaign(ctx, cs, "campaign.created", camp)
}

// changeCampaign applies ch to the account's campaign id and emits campaign.updated when the change
// is one a receiver is told of (UpdateCampaign's notable); ErrEndBeforeStart when the end date
// would not be after the start.
func changeCampaign(ctx context.Context, cs *model.ChangeSet, accountID, id int64, ch CampaignChange) (*Campaign, error) {
	camp, notable, err := UpdateCampaign(ctx, cs.Tx, accountID, id, ch)
	if err != nil {
		return nil, err
	}
	if ch.EndDate != nil && !camp.EndDate.After(camp.StartDate) {
		return nil, ErrEndBeforeStart
	}
	if notable {
		err = emitCampaign(ctx, cs, "campaign.updated", camp)
	}
	return camp, err
}

// emitCampaign emits a campaign event with the campaign's data.
func emitCampaign(ctx context.Context, cs *model.ChangeSet, eventType string, camp *Campaign) error {
	data, err := camp.EventData()
	if err != nil {
		return err
	}
	_, err = cs.Emit(ctx, model.NewEvent{AccountID: camp.AccountID, Variant: model.VariantA, EventType: eventType, Data: data})
	return err
}

// fanEvent emits a fan's event (lead.captured, presave.completed) to the account's published
// website id, its data built from the website and checked as intake checks an event's, and counts
// a signup with the thresholds it crosses. The result is the fan's event.
func fanEvent(ctx context.Context, cs *model.ChangeSet, accountID, id int64, eventType string, build func(*Website) any) (*model.PublishResult, error) {
	w, err := GetWebsite(ctx, cs.Tx, accountID, id, true)
	if err != nil {
		return nil, err
	}
	if w.Status != WebsitePublished {
		return nil, &NotPublishedError{Status: w.Status}
	}
	raw, err := json.Marshal(build(w))
	if err != nil {
		return nil, err
	}
	data, err := wire.CanonicalJSON(raw)
	if err != nil {
		return nil, err
	}
	if err := ValidateEventData(eventType, raw); err != nil {
		return nil, err
	}
	res, err := cs.Emit(ctx, model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: eventType, Data: string(data)})
	if err != nil {
		return nil, err
	}
	_, err = Count(ctx, cs, w, MetricSignups, 1)
	return res, err
}

// countVisit adds n to metric of the account's website id and emits the threshold events it
// causes; the counter's new value.
func countVisit(ctx context.Context, cs *model.ChangeSet, accountID, id int64, metric string, n int64) (int64, error) {
	w, err := GetWebsite(ctx, cs.Tx, accountID, id, true)
	if err != nil {
		return 0, err
	}
	return Count(ctx, cs, w, metric, n)
}

// Count adds n to w's metric and emits the threshold events it causes, in the change.
func Count(ctx context.Context, cs *model.ChangeSet, w *Website, metric string, n int64) (int64, error) {
	value, evs, err := AddToCounter(ctx, cs.Tx, w, metric, n)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if _, err := cs.Emit(ctx, ev); err != nil {
			return 0, err
		}
	}
	return value, nil
}

// MoveWebsite applies a lifecycle move (publish, archive, delete) to the account's website id
// (accountID 0: any account's, for the scheduled publication) and emits its event. hadSchedule
// says whether a scheduled publication was pending, for the caller to cancel its timer after the
// commit. A move the website's state refuses is ErrInvalidTransition.
func MoveWebsite(ctx context.Context, cs *model.ChangeSet, accountID, id int64, move func(*Website) (*model.NewEvent, error)) (w *Website, hadSchedule bool, err error) {
	if w, err = GetWebsite(ctx, cs.Tx, accountID, id, true); err != nil {
		return nil, false, err
	}
	hadSchedule = w.ScheduledAt != nil
	ev, err := move(w)
	if err != nil {
		return nil, false, err
	}
	if err := SaveWebsite(ctx, cs.Tx, w); err != nil {
		return nil, false, err
	}
	if ev != nil {
		if _, err := cs.Emit(ctx, *ev); err != nil {
			return nil, false, fmt.Errorf("emit %s: %w", ev.EventType, err)
		}
	}
	return w, hadSchedule, nil
}
