package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// EventFilter selects a page of events, ordered by id.
type EventFilter struct {
	EventType string
	// Since (inclusive) and Until (exclusive) bound OccurredAt when set.
	Since *time.Time
	Until *time.Time
	After int64
	// NewestFirst orders the page by id descending (the portal's event log): After is not used,
	// and Before, when set, starts the page below that id.
	NewestFirst bool
	Before      int64
	Limit       int64
	// MaxBytes, when set, bounds the page by the bytes of data it carries as well: it ends before
	// the event that would take it past MaxBytes, and always holds at least one event.
	MaxBytes int64
	// Budget, when set, is a hard bound on the bytes of data the page carries: unlike MaxBytes,
	// it leaves out the first event too when that one does not fit, so the page may be empty
	// while More says events are left (a filter's trial, which reads at most its budget).
	Budget int64
}

// EventPage is one page of events. More says that further events come after Last, the id of the
// page's last event (the last one planned, should a purge remove it meanwhile).
type EventPage struct {
	Events []Event
	More   bool
	Last   int64
	// States counts each event's deliveries by state (EventLog; ListEvents leaves it nil).
	States map[int64]map[string]int
}

// EventLog is the event log's page, as the API and the portal show it: ListEvents, with each
// event's deliveries counted by state (CountDeliveryStates).
func EventLog(ctx context.Context, db bun.IDB, scope WebhookScope, f EventFilter) (*EventPage, error) {
	page, err := ListEvents(ctx, db, scope, f)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(page.Events))
	for i := range page.Events {
		ids[i] = page.Events[i].ID
	}
	if page.States, err = CountDeliveryStates(ctx, db, ids); err != nil {
		return nil, err
	}
	return page, nil
}

// ListEvents returns one page of the events within scope: the caller's account and variant, as for
// webhooks. The page is planned from the events' ids and sizes first, so the data of events that do
// not fit is never read.
func ListEvents(ctx context.Context, db bun.IDB, scope WebhookScope, f EventFilter) (*EventPage, error) {
	var rows []sizedRow
	order := "id ASC"
	q := scope.events(db.NewSelect().Model((*Event)(nil))).ColumnExpr("id").ColumnExpr(dataSize("data") + " AS size")
	switch {
	case !f.NewestFirst:
		q = q.Where("id > ?", f.After)
	case f.Before > 0:
		q = q.Where("id < ?", f.Before)
	}
	if f.NewestFirst {
		order = "id DESC"
	}
	q = q.OrderExpr(order).Limit(f.Limit + 1)
	if f.EventType != "" {
		q = q.Where("event_type = ?", f.EventType)
	}
	// Both databases store microseconds. A bound finer than that is compared against the
	// microsecond below it, with the operator that gives the exact bound's answer for every stored
	// time (rounding up instead could carry 9999-12-31 into year 10000).
	if t := f.Since; t != nil {
		op := ">="
		if finerThanMicrosecond(*t) {
			op = ">"
		}
		q = q.Where("occurred_at "+op+" ?", t.Truncate(time.Microsecond))
	}
	if t := f.Until; t != nil {
		op := "<"
		if finerThanMicrosecond(*t) {
			op = "<="
		}
		q = q.Where("occurred_at "+op+" ?", t.Truncate(time.Microsecond))
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	ids, more := fitPage(rows, f.Limit, f.MaxBytes, f.Budget)
	page := &EventPage{Events: []Event{}, More: more}
	if len(ids) == 0 {
		return page, nil
	}
	page.Last = ids[len(ids)-1]
	if err := db.NewSelect().Model(&page.Events).Where("id IN (?)", bun.List(ids)).OrderExpr(order).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return page, nil
}

func finerThanMicrosecond(t time.Time) bool { return !t.Truncate(time.Microsecond).Equal(t) }

// GetEvent loads one event within scope, or ErrNotFound.
func GetEvent(ctx context.Context, db bun.IDB, scope WebhookScope, id int64) (*Event, error) {
	ev := &Event{}
	return ScanOne(ctx, ev, scope.events(db.NewSelect().Model(ev)).Where("id = ?", id), "event")
}

// EventDeliveries returns the deliveries of one event, in id order, those of webhooks deleted since
// included: they are the event's history.
func EventDeliveries(ctx context.Context, db bun.IDB, eventID int64) ([]Delivery, error) {
	page, err := ReadDeliveries(ctx, db, DeliveryQuery{EventID: eventID})
	if err != nil {
		return nil, fmt.Errorf("load the deliveries of event %d: %w", eventID, err)
	}
	deliveries := make([]Delivery, len(page.Views))
	for i := range page.Views {
		deliveries[i] = page.Views[i].Delivery
	}
	return deliveries, nil
}

// CountDeliveryStates counts the deliveries of each of the given events by state, in one query: a
// page of events gets its delivery summary without a query per event. An event without deliveries
// is absent from the result.
func CountDeliveryStates(ctx context.Context, db bun.IDB, eventIDs []int64) (map[int64]map[string]int, error) {
	out := make(map[int64]map[string]int, len(eventIDs))
	if len(eventIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		EventID int64  `bun:"event_id"`
		State   string `bun:"state"`
		N       int    `bun:"n"`
	}
	err := db.NewSelect().Model((*Delivery)(nil)).ColumnExpr("event_id, state, COUNT(*) AS n").
		Where("event_id IN (?)", bun.List(eventIDs)).GroupExpr("event_id, state").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count delivery states: %w", err)
	}
	for _, r := range rows {
		if out[r.EventID] == nil {
			out[r.EventID] = map[string]int{}
		}
		out[r.EventID][r.State] = r.N
	}
	return out, nil
}

// events selects the scope's events, notices left out: they are the account's notices
// (ListNotices), not events of its own.
func (s WebhookScope) events(q *bun.SelectQuery) *bun.SelectQuery {
	return s.apply(q).Where("about_webhook_id IS NULL")
}
