package webhooks

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/model"
)

// FilterEdit is a request's payload filter: Set false leaves the webhook's as it is; Set with JSON
// absent or null removes it; otherwise JSON is the filter as sent (docs/filters.md).
type FilterEdit struct {
	Set  bool
	JSON json.RawMessage
}

// Settings are a webhook's own settings as a request gives them: its limits (nil: the worker's
// defaults), its payload filter, its custom headers, its authentication to the receiver, its TLS
// settings, and the version of its event type's data it receives (nil: on create the newest,
// otherwise as it is).
type Settings struct {
	RateLimit, MaxInFlight model.LimitChange
	Filter                 FilterEdit
	Headers                HeadersEdit
	Auth                   AuthEdit
	TLS                    TLSEdit
	Version                *int
}

// change checks s and turns it into the model's change: the limits in range, the filter compiled
// and stored in its canonical form.
func (s Settings) change() (model.SettingsChange, error) {
	c := model.SettingsChange{RateLimit: s.RateLimit, MaxInFlight: s.MaxInFlight}
	if err := checkLimits(c); err != nil {
		return c, err
	}
	if !s.Filter.Set {
		return c, nil
	}
	c.Filter.Set = true
	if len(s.Filter.JSON) == 0 || string(s.Filter.JSON) == "null" {
		return c, nil
	}
	f, err := compileFilter(s.Filter.JSON)
	if err != nil {
		return c, err
	}
	text := f.String()
	c.Filter.To = &text
	return c, nil
}

// compileFilter compiles a filter as sent, its refusal an InvalidError naming the path of the
// fault: malformed (400) or beyond a limit (422).
func compileFilter(raw json.RawMessage) (*filter.Filter, error) {
	f, err := filter.Compile(raw)
	var fe *filter.Error
	if errors.As(err, &fe) {
		return nil, &InvalidError{Field: fe.Path, Format: "%s", Args: []any{fe.Error()}, Malformed: !fe.Limit}
	}
	return f, err
}

// The bounds of a filter's trial: how many recent events it reads, by default and at most, and how
// many of the matching ids the answer lists.
const (
	DefaultTrialEvents = 100
	MaxTrialEvents     = 1000
	MaxTrialIDs        = 100
)

// Trial is a filter tried against recent events: how many were read, how many it passed, and the
// ids of the newest of those (at most MaxTrialIDs).
type Trial struct {
	Scanned    int
	Matched    int
	MatchedIDs []int64
}

// TryFilter evaluates a filter, as delivery would, against the scope's most recent stored events of
// eventType (limit of them; 0: DefaultTrialEvents), without saving anything. Each event is judged
// in the newest version of its type, what a webhook registered now receives (docs/events.md).
func (s *Service) TryFilter(ctx context.Context, scope model.WebhookScope, raw json.RawMessage, eventType string, limit int) (Trial, error) {
	if err := checkEventType(scope.Variant, eventType); err != nil {
		return Trial{}, err
	}
	if limit == 0 {
		limit = DefaultTrialEvents
	}
	if limit < 1 || limit > MaxTrialEvents {
		return Trial{}, invalid("limit", "limit must be an integer from 1 to %d", MaxTrialEvents)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return Trial{}, missing("filter")
	}
	f, err := compileFilter(raw)
	if err != nil {
		return Trial{}, err
	}
	page, err := model.ListEvents(ctx, s.db, scope, model.EventFilter{EventType: eventType, NewestFirst: true, Limit: int64(limit)})
	if err != nil {
		return Trial{}, err
	}
	t := Trial{Scanned: len(page.Events), MatchedIDs: []int64{}}
	for i := range page.Events {
		body, err := model.FilterBody(&page.Events[i], model.LatestVersion(eventType))
		if err != nil {
			return Trial{}, err
		}
		if !f.Match(body) {
			continue
		}
		t.Matched++
		if len(t.MatchedIDs) < MaxTrialIDs {
			t.MatchedIDs = append(t.MatchedIDs, page.Events[i].ID)
		}
	}
	return t, nil
}
