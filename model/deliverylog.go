package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// DeliveryView is a delivery with its event type and attempts, as the REST API lists it. GetDelivery
// also fills in the event's data, the version it is written in and its time, from which the body is
// rebuilt (Event).
type DeliveryView struct {
	Delivery
	EventType       string    `bun:"event_type"`
	EventData       string    `bun:"event_data"`
	EventOccurredAt time.Time `bun:"event_occurred_at"`
	EventVersion    int       `bun:"event_version"`
	Log             []Attempt `bun:"-"`
}

// DeliveryFilter selects a page of a webhook's deliveries, newest first.
type DeliveryFilter struct {
	WebhookID int64
	// Before, when set, starts the page below that delivery id.
	Before int64
	Limit  int64
	// MaxBytes, when set, bounds the page by the bytes its attempt logs carry (response bodies,
	// request headers, errors) as well: it ends before the delivery that would take it past
	// MaxBytes, and always holds at least one delivery.
	MaxBytes int64
}

// DeliveryPage is one page of deliveries. More says that older deliveries come after Last, the id
// of the page's last delivery (the last one planned, should a purge remove it meanwhile).
type DeliveryPage struct {
	Views []DeliveryView
	More  bool
	Last  int64
}

// attemptLogSize is the SQL for the bytes of a delivery's (d) attempt log.
var attemptLogSize = "(SELECT COALESCE(SUM(" + dataSize("a.response_body") + " + " + dataSize("a.request_headers") + " + " +
	dataSize("a.error") + "), 0) FROM delivery_attempts AS a WHERE a.delivery_id = d.id)"

// ListDeliveries returns one page of a webhook's deliveries, newest first, with their attempts. The
// page is planned from the deliveries' ids and the sizes of their attempt logs first, so the
// attempts of deliveries that do not fit are never read.
func ListDeliveries(ctx context.Context, db bun.IDB, f DeliveryFilter) (*DeliveryPage, error) {
	var rows []sizedRow
	q := db.NewSelect().TableExpr("deliveries AS d").ColumnExpr("d.id").ColumnExpr(attemptLogSize+" AS size").
		Where("d.webhook_id = ?", f.WebhookID).OrderExpr("d.id DESC").Limit(f.Limit + 1)
	if f.Before > 0 {
		q = q.Where("d.id < ?", f.Before)
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	ids, more := fitPage(rows, f.Limit, f.MaxBytes, 0)
	page := &DeliveryPage{Views: []DeliveryView{}, More: more}
	if len(ids) == 0 {
		return page, nil
	}
	page.Last = ids[len(ids)-1]
	err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		ColumnExpr("d.*, e.event_type").Where("d.id IN (?)", bun.List(ids)).OrderExpr("d.id DESC").Scan(ctx, &page.Views)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return page, attachAttempts(ctx, db, page.Views)
}

// GetDelivery returns one delivery of a webhook with its event and attempts, or ErrNotFound when
// the webhook has no delivery of that id.
func GetDelivery(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (*DeliveryView, error) {
	views := make([]DeliveryView, 0, 1)
	err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		ColumnExpr("d.*, e.event_type, e.data AS event_data, e.occurred_at AS event_occurred_at, e.version AS event_version").
		Where("d.id = ?", deliveryID).Where("d.webhook_id = ?", webhookID).Scan(ctx, &views)
	if err != nil {
		return nil, fmt.Errorf("get delivery: %w", err)
	}
	if len(views) == 0 {
		return nil, ErrNotFound
	}
	return &views[0], attachAttempts(ctx, db, views)
}

// attachAttempts loads the attempts of views into their logs, in attempt order.
func attachAttempts(ctx context.Context, db bun.IDB, views []DeliveryView) error {
	if len(views) == 0 {
		return nil
	}
	ids := make([]int64, len(views))
	byID := make(map[int64]*DeliveryView, len(views))
	for i := range views {
		ids[i] = views[i].ID
		byID[views[i].ID] = &views[i]
	}
	var attempts []Attempt
	if err := db.NewSelect().Model(&attempts).Where("delivery_id IN (?)", bun.List(ids)).OrderExpr("delivery_id, attempt").Scan(ctx); err != nil {
		return fmt.Errorf("list attempts: %w", err)
	}
	for _, a := range attempts {
		v := byID[a.DeliveryID]
		v.Log = append(v.Log, a)
	}
	return nil
}

// Event is the event of a view GetDelivery read, as far as it carries it: what rebuilds its body.
func (v *DeliveryView) Event(variant Variant) *Event {
	return &Event{ID: v.EventID, Variant: variant, EventType: v.EventType, Data: v.EventData, Version: v.EventVersion, OccurredAt: v.EventOccurredAt}
}
