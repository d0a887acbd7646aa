package model

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// DefaultPurgeBatch is how many deliveries and how many events one retention batch examines.
const DefaultPurgeBatch = 500

// PurgeKey is a row's place in the purge's scan order.
type PurgeKey struct {
	CreatedAt time.Time
	ID        int64
}

// PurgeCursor is where a retention pass has got to: the last delivery and the last event it
// examined. The zero cursor starts at the oldest rows.
type PurgeCursor struct {
	Delivery PurgeKey
	Event    PurgeKey
}

// Purged counts the rows retention deleted.
type Purged struct {
	Attempts   int64
	Deliveries int64
	Events     int64
}

// PurgeBatch is the outcome of one retention batch.
type PurgeBatch struct {
	Purged
	// Next is where the next batch of the pass starts.
	Next PurgeCursor
	// Done: the pass reached the cutoff in both tables; what expired before it is gone.
	Done bool
}

// PurgeExpired runs one batch of a retention pass that deletes what expired before before (now
// minus WEBHOOKD_RETENTION). It examines the next limit deliveries and the next limit events after
// the cursor, oldest first, and deletes the expired ones among them, children first. Each statement
// is short (a range of an index, or rows by id), so no lock is held for long, and a batch's work
// is bounded however many rows are kept: rows that stay are passed over, not examined again.
//
//   - A delivery expires when it is finished (delivered, canceled or exhausted) and was created and
//     last changed (its last attempt, exhaustion, cancellation or manual retry) before the cutoff.
//   - Its attempts go with it, whatever their age: a delivery's log is kept whole or not at all.
//   - An event expires when it was created before the cutoff and none of its deliveries is left:
//     an event with an unfinished or recently retried delivery stays with it.
//
// Webhooks, accounts, API keys and the other domain tables are never touched. An event's
// Idempotency-Key goes with the event; WEBHOOKD_RETENTION is more than a day, so the key's 24 hours
// are long over by then. Running a batch twice is harmless.
func PurgeExpired(ctx context.Context, db bun.IDB, before time.Time, after PurgeCursor, limit int) (PurgeBatch, error) {
	b := PurgeBatch{Next: after}
	if limit <= 0 {
		return b, fmt.Errorf("purge expired rows: batch size %d is not positive", limit)
	}

	var deliveries []Delivery
	if err := scanAfter(db.NewSelect().Model(&deliveries).Column("id", "state", "created_at", "updated_at"), before, after.Delivery, limit).
		Scan(ctx); err != nil {
		return b, fmt.Errorf("find expired deliveries: %w", err)
	}
	var expired []int64
	for _, d := range deliveries {
		if slices.Contains(EndedStates, d.State) && d.UpdatedAt.Before(before) {
			expired = append(expired, d.ID)
		}
	}
	if n := len(deliveries); n > 0 {
		b.Next.Delivery = PurgeKey{CreatedAt: deliveries[n-1].CreatedAt, ID: deliveries[n-1].ID}
	}
	if len(expired) > 0 {
		res, err := db.NewDelete().Model((*Attempt)(nil)).Where("delivery_id IN (?)", bun.List(expired)).Exec(ctx)
		if b.Attempts, err = affected(res, err); err != nil {
			return b, fmt.Errorf("purge attempts of expired deliveries: %w", err)
		}
		// The rule is checked again in the delete: a delivery that a manual retry claimed (or whose
		// workflow, reset from the Web UI, logged a new attempt) since it was read stays.
		res, err = db.NewDelete().Model((*Delivery)(nil)).Where("id IN (?)", bun.List(expired)).
			Where("state IN (?)", bun.List(EndedStates)).Where("updated_at < ?", before).
			Where("NOT EXISTS (SELECT 1 FROM delivery_attempts AS a WHERE a.delivery_id = delivery.id)").Exec(ctx)
		if b.Deliveries, err = affected(res, err); err != nil {
			return b, fmt.Errorf("purge expired deliveries: %w", err)
		}
	}
	deliveriesDone := len(deliveries) < limit

	// An event's deliveries carry its created_at, so the events before the delivery cursor's time
	// have had all their deliveries examined; the later ones wait for the deliveries to get there.
	eventsBefore := before
	if !deliveriesDone {
		eventsBefore = b.Next.Delivery.CreatedAt
	}
	var events []Event
	if err := scanAfter(db.NewSelect().Model(&events).Column("id", "created_at"), eventsBefore, after.Event, limit).Scan(ctx); err != nil {
		return b, fmt.Errorf("find expired events: %w", err)
	}
	if n := len(events); n > 0 {
		b.Next.Event = PurgeKey{CreatedAt: events[n-1].CreatedAt, ID: events[n-1].ID}
		ids := make([]int64, n)
		for i, e := range events {
			ids[i] = e.ID
		}
		res, err := db.NewDelete().Model((*Event)(nil)).Where("id IN (?)", bun.List(ids)).
			Where("NOT EXISTS (SELECT 1 FROM deliveries AS d WHERE d.event_id = event.id)").Exec(ctx)
		if b.Events, err = affected(res, err); err != nil {
			return b, fmt.Errorf("purge expired events: %w", err)
		}
	}
	b.Done = deliveriesDone && len(events) < limit
	return b, nil
}

// scanAfter selects the next limit rows created before cutoff after the key, in (created_at, id)
// order: a range of the table's created index (migration 0007), however many rows are kept.
func scanAfter(q *bun.SelectQuery, before time.Time, after PurgeKey, limit int) *bun.SelectQuery {
	q = q.Where("created_at < ?", before)
	if after.ID != 0 {
		q = q.Where("(created_at, id) > (?, ?)", after.CreatedAt, after.ID)
	}
	return q.OrderExpr("created_at ASC, id ASC").Limit(int64(limit))
}

func affected(res interface{ RowsAffected() (int64, error) }, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
