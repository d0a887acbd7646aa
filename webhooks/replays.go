package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/model"
)

// Replays (docs/api.md, "Replays"): the account's deliveries across its webhooks that a window,
// event types, webhooks, states, status classes and a payload filter match, sent again by one
// workflow. One method per action, so that each is recorded in one place.

// ReplayAsk is a replay as a surface asks for it: Since is required, Until nil means the time of
// the request; States empty means the states that did not succeed (model.RecoverableStates);
// Filter, when set and not null, is a payload filter judged on each delivery's body.
type ReplayAsk struct {
	Since         time.Time
	Until         *time.Time
	EventTypes    []string
	WebhookIDs    []int64
	States        []string
	StatusClasses []string
	Filter        json.RawMessage
}

// ReplayPlan is what a replay matches: how many deliveries, and the first (oldest) MaxPlanIDs of
// their ids.
type ReplayPlan struct {
	Matched  int
	FirstIDs []int64
}

const (
	// MaxPlanIDs is how many of the matched ids a dry run lists.
	MaxPlanIDs = 20
	// MaxReplayDeliveries bounds what one replay matches: more is refused (422 naming since), so
	// that a replay's ids, fixed at its creation, stay a bounded write.
	MaxReplayDeliveries = 100_000
	// MaxRunningReplays is how many replays an account may run at once in each variant: each
	// holds a worker's activity slot while it hands its deliveries over, one at a time, so an
	// account's replays hold at most this many slots and starts in flight (docs/architecture.md,
	// "What accounts share").
	MaxRunningReplays = 2
	// replayPage and replayFilterPage are how many deliveries a replay's match reads at a time,
	// the second with their events' data (up to 256 KiB each, so at most 8 MiB a page) to judge a
	// filter on.
	replayPage       = 500
	replayFilterPage = 32
)

// The bounds of a replay's match, a dry run's and a real one's alike (issue 46): the match runs in
// the request, so it gets a filter trial's kind of budget (docs/architecture.md, "What accounts
// share").
const (
	// MaxReplayMatchBytes bounds the stored event data a match with a filter reads in all: once
	// the pages read pass 64 MiB the replay is refused (422 naming filter), before it judges more.
	// It holds one page at a time. A match without a filter reads no event data.
	MaxReplayMatchBytes = 64 << 20
	// MaxReplayMatchTime bounds a match's work: once 10 s have passed the replay is refused (422
	// naming since), before its next page or cutting short the read under way.
	MaxReplayMatchTime = 10 * time.Second
	// MaxConcurrentReplayMatches is how many matches (dry runs and replays being created) of one
	// account run at once; another is refused with a BusyError, whoever else matches.
	MaxConcurrentReplayMatches = 2
)

// errMatchTime ends a replay's match at MaxReplayMatchTime, told from its caller's leaving by
// context.Cause.
var errMatchTime = errors.New("the replay's match took its time")

// criteria checks ask at now and returns the criteria it stands for (Until set, States defaulted,
// the filter in its canonical text) and the compiled filter, nil for none. Its refusals name the
// body's fields (BodyFields).
func (ask ReplayAsk) criteria(v model.Variant, now time.Time) (model.ReplayCriteria, *filter.Filter, error) {
	c := model.ReplayCriteria{Since: ask.Since, EventTypes: ask.EventTypes, WebhookIDs: ask.WebhookIDs, States: ask.States, StatusClasses: ask.StatusClasses}
	m, err := Recovery{Since: ask.Since, Until: ask.Until}.check(0, now)
	if err != nil {
		return c, nil, err
	}
	c.Until = m.Until
	if c.Until.IsZero() {
		c.Until = now
	}
	if len(c.States) == 0 {
		c.States = slices.Clone(model.RecoverableStates)
	}
	if slices.Contains(c.States, model.DeliveryCanceled) {
		return c, nil, invalid("states", "states cannot name canceled: a canceled delivery's webhook was deleted, and it cannot be sent again")
	}
	if err := selectionOf(c).check(v, BodyFields); err != nil {
		return c, nil, err
	}
	if len(ask.Filter) == 0 || string(ask.Filter) == "null" {
		return c, nil, nil
	}
	f, err := compileFilter(ask.Filter)
	if err != nil {
		return c, nil, err
	}
	c.Filter = json.RawMessage(f.String())
	return c, f, nil
}

// PlanReplay is a dry run: what Replay would match now, sending nothing.
func (s *Service) PlanReplay(ctx context.Context, scope model.WebhookScope, ask ReplayAsk) (ReplayPlan, error) {
	c, f, err := ask.criteria(scope.Variant, s.clock.Now())
	if err != nil {
		return ReplayPlan{}, err
	}
	plan := ReplayPlan{FirstIDs: []int64{}}
	err = s.matchReplay(ctx, scope, c, f, func(v *model.DeliveryView) {
		plan.Matched++
		if len(plan.FirstIDs) < MaxPlanIDs {
			plan.FirstIDs = append(plan.FirstIDs, v.ID)
		}
	})
	return plan, err
}

// Replay creates a replay of the scope's deliveries that ask matches now and starts its workflow
// (dispatch.Activities.ReplayDeliveries), answering at once. The deliveries are fixed here, the
// same ones a dry run (PlanReplay) counts, and their webhooks are enabled if they were disabled,
// as for any manual retry. Temporal away: the replay is not kept, and the answer is ErrUnavailable.
func (s *Service) Replay(ctx context.Context, scope model.WebhookScope, ask ReplayAsk) (*model.Replay, error) {
	c, f, err := ask.criteria(scope.Variant, s.clock.Now())
	if err != nil {
		return nil, err
	}
	if s.dispatcher == nil {
		return nil, ErrUnavailable
	}
	var ids []int64
	hooks := map[int64]bool{}
	if err := s.matchReplay(ctx, scope, c, f, func(v *model.DeliveryView) {
		ids = append(ids, v.ID)
		hooks[v.WebhookID] = true
	}); err != nil {
		return nil, err
	}
	text, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	r := &model.Replay{AccountID: scope.AccountID, Variant: scope.Variant, Criteria: string(text)}
	if err := model.CreateReplay(ctx, s.db, r, ids, MaxRunningReplays); errors.Is(err, model.ErrReplaysRunning) {
		return nil, ErrReplaysBusy
	} else if err != nil {
		return nil, err
	}
	for id := range hooks {
		if err := model.ReenableWebhook(ctx, s.db, id); err != nil {
			return nil, err
		}
	}
	err = s.temporal(ctx, "replay", func(ctx context.Context, d *dispatch.Dispatcher) error {
		_, err := d.StartReplay(ctx, r.ID, r.Matched)
		return err
	})
	if err != nil {
		return nil, errors.Join(err, model.DeleteReplay(context.WithoutCancel(ctx), s.db, r.ID))
	}
	s.recordReplay(ctx, scope, audit.ReplayCreate, r.ID, audit.Changes{"criteria": audit.Changed(nil, json.RawMessage(text)), "matched": audit.Changed(nil, r.Matched)})
	return r, nil
}

// GetReplay reads replay id within scope; ErrNotFound when the scope has none of that id.
func (s *Service) GetReplay(ctx context.Context, scope model.WebhookScope, id int64) (*model.Replay, error) {
	return model.GetReplay(ctx, s.db, &scope, id)
}

// CancelReplay cancels replay id within scope: what it has not sent is not sent, and its counts
// stay. The row is marked first, which stops the workflow's activity before its next delivery
// whatever Temporal answers; then the workflow is canceled. A replay that has ended already is
// answered as it is. ErrNotFound when the scope has none of that id.
func (s *Service) CancelReplay(ctx context.Context, scope model.WebhookScope, id int64) (*model.Replay, error) {
	if _, err := model.GetReplay(ctx, s.db, &scope, id); err != nil {
		return nil, err
	}
	moved, err := model.EndReplay(ctx, s.db, &scope, id, model.ReplayCanceled)
	if err != nil {
		return nil, err
	}
	if moved {
		r, err := model.GetReplay(ctx, s.db, &scope, id)
		if err != nil {
			return nil, err
		}
		s.recordReplay(ctx, scope, audit.ReplayCancel, id, audit.Changes{"state": audit.Changed(model.ReplayRunning, model.ReplayCanceled),
			"sent": audit.Changed(nil, r.Sent), "remaining": audit.Changed(nil, r.Remaining())})
	}
	if moved && s.dispatcher != nil {
		// The row stops the activity already: a Temporal away only leaves the workflow to end
		// on its own, at its next delivery.
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		if err := s.dispatcher.CancelReplay(cctx, id); err != nil {
			s.log.Warn("cancel replay workflow", "replay", id, "err", err)
		}
		cancel()
	}
	return model.GetReplay(ctx, s.db, &scope, id)
}

// recordReplay records a replay's action in the audit log (the criteria, never a secret: a
// replay's criteria hold none). A failure to record is logged: the replay stands.
func (s *Service) recordReplay(ctx context.Context, scope model.WebhookScope, action string, id int64, changes audit.Changes) {
	if err := audit.Record(ctx, s.db, scope.AccountID, scope.Variant, action, audit.TargetReplay, audit.ID(id), changes); err != nil {
		s.log.Warn("record an audit entry", "action", action, "replay", id, "err", err)
	}
}

// selectionOf is the part of c a read of deliveries keeps.
func selectionOf(c model.ReplayCriteria) Selection {
	return Selection{EventTypes: c.EventTypes, WebhookIDs: c.WebhookIDs, States: c.States, StatusClasses: c.StatusClasses, Since: c.Since, Until: c.Until}
}

// matchReplay hands visit the scope's deliveries that c (and f, when set) match, oldest first, up
// to the largest id that matched c when it began: those that arrive meanwhile are not its. It reads
// them a page at a time, and refuses (naming since) more than MaxReplayDeliveries. Its work is
// bounded: at most MaxConcurrentReplayMatches of an account at once (beyond them a BusyError),
// MaxReplayMatchTime, and MaxReplayMatchBytes of event data with a filter; past a bound it is
// refused, naming the field that narrows it, and the refusal is the same for a dry run and a
// replay. It answers the context's error when its caller leaves.
func (s *Service) matchReplay(ctx context.Context, scope model.WebhookScope, c model.ReplayCriteria, f *filter.Filter, visit func(*model.DeliveryView)) error {
	if !s.replayMatches.enter(scope.AccountID, MaxConcurrentReplayMatches) {
		return &BusyError{Work: "replay matches", Max: MaxConcurrentReplayMatches, RetryAfter: MaxReplayMatchTime}
	}
	defer s.replayMatches.leave(scope.AccountID)
	ctx, cancel := context.WithTimeoutCause(ctx, s.replayMatchTime, errMatchTime)
	defer cancel()
	err := s.readReplayMatch(ctx, scope, c, f, visit)
	if err != nil && errors.Is(context.Cause(ctx), errMatchTime) {
		// Whatever the read answered as the deadline struck it (a driver's own error included).
		return invalid("since", "the replay's match took more than %v; narrow it (since, until, eventTypes, webhookIds, states, statusClasses)", s.replayMatchTime)
	}
	return err
}

// readReplayMatch is matchReplay's read, within its bounds of time (ctx) and bytes.
func (s *Service) readReplayMatch(ctx context.Context, scope model.WebhookScope, c model.ReplayCriteria, f *filter.Filter, visit func(*model.DeliveryView)) error {
	tooMany := invalid("since", "the replay matches more than %d deliveries; narrow it (since, until, eventTypes, webhookIds, states, statusClasses, filter)", MaxReplayDeliveries)
	q := selectionOf(c).query()
	q.Scope = &scope
	n, upTo, err := model.CountDeliveries(ctx, s.db, q)
	switch {
	case err != nil:
		return err
	case n == 0:
		return nil
	case f == nil && n > MaxReplayDeliveries:
		return tooMany
	}
	q.UpTo, q.Limit = upTo, replayPage
	if f != nil {
		q.Limit, q.Include = replayFilterPage, model.IncludeEvent
	}
	matched, read := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := s.Deliveries(ctx, scope, q)
		if err != nil {
			return err
		}
		for i := range page.Views {
			read += len(page.Views[i].EventData)
		}
		if read > s.replayMatchBytes {
			return invalid("filter", "the replay's filter would judge more than %d MiB of stored events; narrow it (since, until, eventTypes, webhookIds, states, statusClasses)", s.replayMatchBytes>>20)
		}
		for i := range page.Views {
			v := &page.Views[i]
			if f != nil && !s.passes(f, v) {
				continue
			}
			if matched++; matched > MaxReplayDeliveries {
				return tooMany
			}
			visit(v)
		}
		if !page.More {
			return nil
		}
		q.After = page.Last
	}
}

// passes judges f on v's body as its webhook's receiver gets it (model.FilterBody, the body the
// intake judges a webhook's own filter on). A body webhookd cannot build passes, as at the intake.
func (s *Service) passes(f *filter.Filter, v *model.DeliveryView) bool {
	body, err := model.FilterBody(s.versions, v.Event(v.Variant), v.WebhookVersion)
	if err != nil {
		return true
	}
	return f.Match(body)
}
