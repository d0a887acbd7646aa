package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

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
// defaults), its payload filter, its ordering key, its custom headers, its authentication to the receiver, its TLS
// settings, and the version of its event type's data it receives (nil: on create the newest,
// otherwise as it is).
type Settings struct {
	RateLimit, MaxInFlight model.LimitChange
	Filter                 FilterEdit
	Ordering               OrderingEdit
	Headers                HeadersEdit
	Auth                   AuthEdit
	TLS                    TLSEdit
	Destination            DestinationEdit
	Version                *int
}

// change checks s and turns it into the model's change: the limits in range, the filter compiled
// and stored in its canonical form, the ordering key checked.
func (s Settings) change() (model.SettingsChange, error) {
	c := model.SettingsChange{RateLimit: s.RateLimit, MaxInFlight: s.MaxInFlight}
	if err := checkLimits(c); err != nil {
		return c, err
	}
	var err error
	if c.Ordering, err = s.Ordering.change(); err != nil {
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

// The bounds of a trial's work (issue 40): what it reads at once, in all and for how long, and how
// many of an account's trials run at once.
const (
	// TrialPageEvents and TrialPageBytes bound one page: the trial holds one page's data at a time.
	// A page holds at least one event that fits what is left of MaxTrialBytes, whatever its size
	// (an event's body is at most 256 KiB).
	TrialPageEvents = 25
	TrialPageBytes  = 1 << 20
	// MaxTrialBytes bounds the stored data a trial reads in all: it stops before the event that
	// would take it past 8 MiB, and says so (TruncatedBy TrialStoppedByBytes).
	MaxTrialBytes = 8 << 20
	// MaxTrialTime bounds a trial's work: once 5 s have passed it stops, before its next event or
	// cutting short the read under way, and says so (TruncatedBy TrialStoppedByTime). It stops the
	// same way, answering the context's error instead, when its caller leaves.
	MaxTrialTime = 5 * time.Second
	// MaxConcurrentTrials is how many trials of one account run at once; another is refused with a
	// BusyError, whoever else runs trials.
	MaxConcurrentTrials = 2
)

// Why a trial stopped before it had read limit events (Trial.TruncatedBy).
const (
	TrialStoppedByBytes = "bytes"
	TrialStoppedByTime  = "time"
)

// Trial is a filter tried against recent events: how many were read, how many it passed, and the
// ids of the newest of those (at most MaxTrialIDs). TruncatedBy, when set, says that the trial
// stopped before it had read the events asked for: at MaxTrialBytes (TrialStoppedByBytes) or
// MaxTrialTime (TrialStoppedByTime); Scanned counts those it read.
type Trial struct {
	Scanned     int
	Matched     int
	MatchedIDs  []int64
	TruncatedBy string
}

// errTrialTime ends a trial's context at MaxTrialTime, told from its caller's leaving by
// context.Cause.
var errTrialTime = errors.New("the filter trial's time is up")

// TryFilter evaluates a filter, as delivery would, against the scope's most recent stored events of
// eventType (limit of them; 0: DefaultTrialEvents), without saving anything. Each event is judged
// in the newest version of its type, what a webhook registered now receives (docs/events.md).
//
// It reads the events a page at a time, newest first, and stops early when the next event would
// take the data read past MaxTrialBytes or when MaxTrialTime has passed, answering what it read
// (Trial.TruncatedBy says why), or at once with the context's error when ctx ends. At most
// MaxConcurrentTrials of an account run at once; beyond them, a BusyError.
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
	if !s.trials.enter(scope.AccountID, MaxConcurrentTrials) {
		return Trial{}, &BusyError{Work: "filter trials", Max: MaxConcurrentTrials, RetryAfter: MaxTrialTime}
	}
	defer s.trials.leave(scope.AccountID)
	ctx, cancel := context.WithTimeoutCause(ctx, s.trialTime, errTrialTime)
	defer cancel()
	t := Trial{MatchedIDs: []int64{}}
	err = s.readTrial(ctx, scope, eventType, limit, func(ev *model.Event) error {
		body, err := model.FilterBody(s.versions, ev, model.LatestVersion(s.versions, eventType))
		if err != nil {
			return err
		}
		t.Scanned++
		if !f.Match(body) {
			return nil
		}
		t.Matched++
		if len(t.MatchedIDs) < MaxTrialIDs {
			t.MatchedIDs = append(t.MatchedIDs, ev.ID)
		}
		return nil
	})
	switch {
	case errors.Is(err, errTrialBytes):
		t.TruncatedBy = TrialStoppedByBytes
	case err != nil && errors.Is(context.Cause(ctx), errTrialTime):
		// Whatever the read answered as the deadline struck it (a driver's own error included).
		t.TruncatedBy = TrialStoppedByTime
	case err != nil:
		return Trial{}, err
	}
	return t, nil
}

// errTrialBytes ends a trial's read where the next event would take it past MaxTrialBytes.
var errTrialBytes = errors.New("the filter trial's bytes are spent")

// readTrial hands judge the scope's limit most recent events of eventType, newest first, a page at a
// time: no more than MaxTrialBytes of data in all (errTrialBytes where the next would pass it),
// checking ctx before each event. Only one page's data is held at a time.
func (s *Service) readTrial(ctx context.Context, scope model.WebhookScope, eventType string, limit int, judge func(*model.Event) error) error {
	var read, before int64
	for left := int64(limit); left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := model.ListEvents(ctx, s.db, scope, model.EventFilter{
			EventType: eventType, NewestFirst: true, Before: before,
			Limit: min(left, TrialPageEvents), MaxBytes: TrialPageBytes, Budget: MaxTrialBytes - read,
		})
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return err
		}
		for i := range page.Events {
			if err := ctx.Err(); err != nil {
				return err
			}
			read += int64(len(page.Events[i].Data))
			if err := judge(&page.Events[i]); err != nil {
				return err
			}
		}
		left -= int64(len(page.Events))
		switch {
		case !page.More:
			return nil
		case page.Last == 0:
			// Nothing was planned: the next event does not fit what is left of the budget.
			return errTrialBytes
		}
		before = page.Last
	}
	return nil
}

// accountGate admits at most a number of calls of one account at a time (enter's most); accounts
// do not share their places. The filter trials have one, the replays' matches another.
type accountGate struct {
	mu      sync.Mutex
	running map[int64]int
}

func (g *accountGate) enter(account int64, most int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[account] >= most {
		return false
	}
	if g.running == nil {
		g.running = map[int64]int{}
	}
	g.running[account]++
	return true
}

func (g *accountGate) leave(account int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[account]--; g.running[account] <= 0 {
		delete(g.running, account)
	}
}
