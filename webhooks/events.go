package webhooks

import (
	"context"

	"github.com/webhookd/webhookd/model"
)

// EventLog is a page of the scope's events with each one's deliveries counted by state, filtered
// by f: an event type of the variant or the test event, and a window whose start comes before its
// end.
func (s *Service) EventLog(ctx context.Context, scope model.WebhookScope, f model.EventFilter) (*model.EventPage, error) {
	v := scope.Variant
	if f.EventType != "" && f.EventType != model.EventTest && !v.Registrable(f.EventType) {
		return nil, invalid("eventType", "unknown eventType %q; one of %v or %s", f.EventType, v.EventTypes(), model.EventTest)
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		return nil, invalid("since", "since must be before until")
	}
	return model.EventLog(ctx, s.db, scope, f)
}

// Event is one event of the scope with every delivery it made, those to webhooks deleted since
// included.
func (s *Service) Event(ctx context.Context, scope model.WebhookScope, id int64) (*model.Event, []model.Delivery, error) {
	ev, err := model.GetEvent(ctx, s.db, scope, id)
	if err != nil {
		return nil, nil, err
	}
	deliveries, err := model.EventDeliveries(ctx, s.db, ev.ID)
	if err != nil {
		return nil, nil, err
	}
	return ev, deliveries, nil
}
