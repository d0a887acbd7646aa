package webhooks

import (
	"context"
	"slices"
	"time"

	"github.com/webhookd/webhookd/model"
)

// Selection is what the delivery log across webhooks (DeliveryLog) and a replay (Replay) keep of
// the scope's deliveries: those of these event types, webhooks, states and status classes (each
// list empty: any), created in [Since, Until) (each zero: unbounded).
type Selection struct {
	EventTypes    []string
	WebhookIDs    []int64
	States        []string
	StatusClasses []string
	Since, Until  time.Time
}

// SelectionFields names a Selection's fields as a surface spells them, for its refusals.
type SelectionFields struct {
	EventTypes, WebhookIDs, States, StatusClasses, Since, Until string
}

var (
	// QueryFields: GET <prefix>/deliveries's parameters, one name per list (comma-separated).
	QueryFields = SelectionFields{EventTypes: "eventType", WebhookIDs: "webhookId", States: "state", StatusClasses: "statusClass", Since: "since", Until: "until"}
	// BodyFields: POST <prefix>/replays's fields, arrays named in the plural.
	BodyFields = SelectionFields{EventTypes: "eventTypes", WebhookIDs: "webhookIds", States: "states", StatusClasses: "statusClasses", Since: "since", Until: "until"}
)

// MaxSelectionItems bounds each list of a Selection: a longer one is refused (422) rather than
// turned into a statement of thousands of parameters.
const MaxSelectionItems = 100

// check refuses, naming the field as f spells it: a list longer than MaxSelectionItems (422), a
// name that is not one of the variant's event types, of the states or of the status classes, an
// id below 1 (400), and an until that is not after since (422).
func (sel Selection) check(v model.Variant, f SelectionFields) error {
	types := append(v.EventTypes(), model.EventTest) // a test's deliveries, in either variant
	for _, l := range []struct {
		field   string
		names   []string
		allowed []string
	}{{f.EventTypes, sel.EventTypes, types}, {f.States, sel.States, model.DeliveryStates}, {f.StatusClasses, sel.StatusClasses, model.StatusClasses}} {
		if len(l.names) > MaxSelectionItems {
			return invalid(l.field, "%s may name at most %d values", l.field, MaxSelectionItems)
		}
		for _, n := range l.names {
			if !slices.Contains(l.allowed, n) {
				return &InvalidError{Field: l.field, Format: "%s: unknown value %q; one of %v", Args: []any{l.field, n, l.allowed}, Malformed: true}
			}
		}
	}
	if len(sel.WebhookIDs) > MaxSelectionItems {
		return invalid(f.WebhookIDs, "%s may name at most %d values", f.WebhookIDs, MaxSelectionItems)
	}
	for _, id := range sel.WebhookIDs {
		if id < 1 {
			return &InvalidError{Field: f.WebhookIDs, Format: "%s must be positive integer webhook ids", Args: []any{f.WebhookIDs}, Malformed: true}
		}
	}
	if !sel.Since.IsZero() && !sel.Until.IsZero() && !sel.Until.After(sel.Since) {
		return invalid(f.Until, "%s must be after %s", f.Until, f.Since)
	}
	return nil
}

// query is the read of the deliveries sel keeps, within no scope yet.
func (sel Selection) query() model.DeliveryQuery {
	return model.DeliveryQuery{EventTypes: sel.EventTypes, WebhookIDs: sel.WebhookIDs, States: sel.States,
		StatusClasses: sel.StatusClasses, Since: sel.Since, Until: sel.Until}
}

// DeliveryLog reads a page of the scope's deliveries across its webhooks that sel keeps, newest
// first, below before when it is set, at most limit of them and at most maxBytes of attempt logs
// (model.DeliveryQuery.MaxBytes), with what include asks for (the API's log, the attempts; the
// portal's failures, none). sel's fields are named as the API's query names them (QueryFields).
func (s *Service) DeliveryLog(ctx context.Context, scope model.WebhookScope, sel Selection, before, limit, maxBytes int64,
	include model.DeliveryInclude) (*model.DeliveryPage, error) {
	if err := sel.check(scope.Variant, QueryFields); err != nil {
		return nil, err
	}
	q := sel.query()
	q.Before, q.Order, q.Limit, q.MaxBytes, q.Include = before, model.NewestFirst, limit, maxBytes, include
	return s.Deliveries(ctx, scope, q)
}
