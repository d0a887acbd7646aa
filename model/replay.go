package model

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Replay states: a replay runs until it has handled every delivery it matched (done), or until it
// is canceled.
const (
	ReplayRunning  = "running"
	ReplayDone     = "done"
	ReplayCanceled = "canceled"
)

// Replay is a replay of an account's deliveries (docs/api.md, "Replays"): the criteria it was asked
// with (JSON, as the use case writes them), how many deliveries they matched when it was created
// (its items), and how many of those it has sent and skipped so far. After is the last item it has
// handled, in delivery id order.
type Replay struct {
	bun.BaseModel `bun:"table:replays"`

	ID         int64      `bun:"id,pk,autoincrement"`
	AccountID  int64      `bun:"account_id,notnull"`
	Variant    Variant    `bun:"variant,notnull"`
	Criteria   string     `bun:"criteria,notnull"`
	State      string     `bun:"state,notnull"`
	Matched    int64      `bun:"matched,notnull"`
	Sent       int64      `bun:"sent,notnull"`
	Skipped    int64      `bun:"skipped,notnull"`
	After      int64      `bun:"after_id,notnull"`
	CreatedAt  time.Time  `bun:"created_at,notnull"`
	FinishedAt *time.Time `bun:"finished_at"`
}

// Remaining is how many of the matched deliveries the replay has not handled: none once it is done;
// those it will never send once it is canceled.
func (r *Replay) Remaining() int64 {
	if r.State == ReplayDone {
		return 0
	}
	return max(0, r.Matched-r.Sent-r.Skipped)
}

// ReplayCriteria are what a replay was asked to send, as its row keeps them (JSON): the window
// [Since, Until), and, each when set, the event types, webhooks, states, status classes and
// payload filter (its canonical text) the deliveries must match. States is always set.
type ReplayCriteria struct {
	Since         time.Time       `json:"since"`
	Until         time.Time       `json:"until"`
	EventTypes    []string        `json:"eventTypes,omitempty"`
	WebhookIDs    []int64         `json:"webhookIds,omitempty"`
	States        []string        `json:"states"`
	StatusClasses []string        `json:"statusClasses,omitempty"`
	Filter        json.RawMessage `json:"filter,omitempty"`
}

// ReadCriteria decodes the replay's criteria.
func (r *Replay) ReadCriteria() (ReplayCriteria, error) {
	var c ReplayCriteria
	if err := json.Unmarshal([]byte(r.Criteria), &c); err != nil {
		return c, fmt.Errorf("read replay %d's criteria: %w", r.ID, err)
	}
	return c, nil
}

// replayItem is one delivery a replay matched.
type replayItem struct {
	bun.BaseModel `bun:"table:replay_items"`

	ReplayID   int64 `bun:"replay_id,pk"`
	DeliveryID int64 `bun:"delivery_id,pk"`
}

// replayItemBatch is how many items one statement inserts.
const replayItemBatch = 500

// ErrReplaysRunning refuses a replay while its account and variant already run the most replays
// the caller allows (CreateReplay's maxRunning).
var ErrReplaysRunning = errors.New("the account already runs its most replays")

// CreateReplay stores r (running, matched the number of ids) with the ids of the deliveries it
// matched, in one transaction, and sets r's id; ErrReplaysRunning when r's account and variant
// already run maxRunning replays. As CreateWebhook's limit, the count and the insert run in one
// transaction holding the account row.
func CreateReplay(ctx context.Context, db bun.IDB, r *Replay, ids []int64, maxRunning int) error {
	r.State, r.Matched, r.CreatedAt = ReplayRunning, int64(len(ids)), Now()
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockAccountForCount(ctx, tx, r.AccountID); err != nil {
			return err
		}
		running, err := tx.NewSelect().Model((*Replay)(nil)).
			Where("account_id = ? AND variant = ? AND state = ?", r.AccountID, r.Variant, ReplayRunning).Count(ctx)
		if err != nil {
			return fmt.Errorf("count running replays: %w", err)
		}
		if running >= int64(maxRunning) {
			return ErrReplaysRunning
		}
		if _, err := tx.NewInsert().Model(r).Returning("id").Exec(ctx); err != nil {
			return fmt.Errorf("create replay: %w", err)
		}
		for start := 0; start < len(ids); start += replayItemBatch {
			batch := ids[start:min(start+replayItemBatch, len(ids))]
			items := make([]replayItem, len(batch))
			for i, id := range batch {
				items[i] = replayItem{ReplayID: r.ID, DeliveryID: id}
			}
			if _, err := tx.NewInsert().Model(&items).Exec(ctx); err != nil {
				return fmt.Errorf("create replay: %w", err)
			}
		}
		return nil
	})
}

// GetReplay reads replay id within scope (its account and variant); ErrNotFound when the scope has
// none of that id. A nil scope reads any account's: the activity's.
func GetReplay(ctx context.Context, db bun.IDB, scope *WebhookScope, id int64) (*Replay, error) {
	r := &Replay{}
	q := db.NewSelect().Model(r).Where("id = ?", id)
	if scope != nil {
		q = q.Where("account_id = ?", scope.AccountID).Where("variant = ?", scope.Variant)
	}
	if err := q.Scan(ctx); errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, fmt.Errorf("read replay %d: %w", id, err)
	}
	return r, nil
}

// ReplayItems returns the ids of replay id's deliveries after after, in id order, at most limit.
func ReplayItems(ctx context.Context, db bun.IDB, id, after, limit int64) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*replayItem)(nil)).Column("delivery_id").Where("replay_id = ?", id).Where("delivery_id > ?", after).
		OrderExpr("delivery_id ASC").Limit(limit).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("read replay %d's deliveries: %w", id, err)
	}
	return ids, nil
}

// AdvanceReplay records, in tx, that running replay id has handled delivery deliveryID, sent or
// skipped. It reports false, and records nothing, when the replay is no longer running (canceled)
// or has handled that delivery already: the caller then rolls its claim back with tx.
func AdvanceReplay(ctx context.Context, tx bun.IDB, id, deliveryID int64, sent bool) (bool, error) {
	column := "skipped"
	if sent {
		column = "sent"
	}
	res, err := tx.NewUpdate().Model((*Replay)(nil)).Set(column+" = "+column+" + 1").Set("after_id = ?", deliveryID).
		Where("id = ?", id).Where("state = ?", ReplayRunning).Where("after_id < ?", deliveryID).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("advance replay %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("advance replay %d: %w", id, err)
	}
	return n == 1, nil
}

// UndoAdvance takes back, in tx, AdvanceReplay's record of a delivery sent whose hand-over failed:
// the replay's cursor goes back to before (the delivery before it), so the replay tries it again.
func UndoAdvance(ctx context.Context, tx bun.IDB, id, deliveryID, before int64) error {
	_, err := tx.NewUpdate().Model((*Replay)(nil)).Set("sent = sent - 1").Set("after_id = ?", before).
		Where("id = ?", id).Where("after_id = ?", deliveryID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("undo replay %d's advance: %w", id, err)
	}
	return nil
}

// EndReplay moves replay id from running to state (done or canceled), now, and drops its items;
// scope, when set, must hold it. It reports whether it moved it: false when it had ended already.
func EndReplay(ctx context.Context, db bun.IDB, scope *WebhookScope, id int64, state string) (bool, error) {
	var moved bool
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		q := tx.NewUpdate().Model((*Replay)(nil)).Set("state = ?", state).Set("finished_at = ?", Now()).
			Where("id = ?", id).Where("state = ?", ReplayRunning)
		if scope != nil {
			q = q.Where("account_id = ?", scope.AccountID).Where("variant = ?", scope.Variant)
		}
		res, err := q.Exec(ctx)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		moved = true
		_, err = tx.NewDelete().Model((*replayItem)(nil)).Where("replay_id = ?", id).Exec(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("end replay %d: %w", id, err)
	}
	return moved, nil
}

// DeleteReplay removes replay id and its items: one whose workflow could not be started.
func DeleteReplay(ctx context.Context, db bun.IDB, id int64) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*replayItem)(nil)).Where("replay_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete replay %d: %w", id, err)
		}
		if _, err := tx.NewDelete().Model((*Replay)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete replay %d: %w", id, err)
		}
		return nil
	})
}

// PurgeReplays deletes up to limit replays that ended (done or canceled) before before (retention's
// cutoff; their items went when they ended) and returns how many it deleted. A running replay is
// kept, however old. Running it twice is harmless.
func PurgeReplays(ctx context.Context, db bun.IDB, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("purge replays: batch size %d is not positive", limit)
	}
	old := db.NewSelect().Model((*Replay)(nil)).Column("id").Where("state <> ?", ReplayRunning).
		Where("finished_at < ?", before).OrderExpr("id").Limit(int64(limit))
	res, err := db.NewDelete().Model((*Replay)(nil)).Where("id IN (?)", old).Exec(ctx)
	n, err := affected(res, err)
	if err != nil {
		return 0, fmt.Errorf("purge replays: %w", err)
	}
	return n, nil
}
