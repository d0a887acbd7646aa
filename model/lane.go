package model

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Lane is one ordered lane (docs/ordering.md): the deliveries of one ordered webhook whose bodies
// carry one value at its ordering key, made one at a time in the order intake accepted their
// events.
type Lane struct {
	bun.BaseModel `bun:"table:lanes"`

	ID        int64 `bun:"id,pk,autoincrement"`
	WebhookID int64 `bun:"webhook_id,notnull"`
	// Key is the JSON text of the value at the webhook's ordering key (LaneKeyOf); NoLaneKey for
	// the events whose body lacks it.
	Key string `bun:"lane_key,notnull"`
	// LastSeq is the number of the newest delivery given to the lane, DoneSeq that of the last one
	// its workflow finished: delivered, or skipped by its owner.
	LastSeq   int64     `bun:"last_seq,notnull"`
	DoneSeq   int64     `bun:"done_seq,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// NoLaneKey is the key of the lane of an ordered webhook's events whose body has no value at its
// ordering key (or one that is not a string, a number or a boolean): they keep their order among
// themselves, since webhookd cannot tell which entity they belong to, and hold up no keyed lane.
const NoLaneKey = ""

// maxLaneKey bounds a lane key as stored: a longer value is stored as its SHA-256 (HashedKeyPrefix
// and the hex digest), which keeps its events in one lane of their own all the same.
const maxLaneKey = 200

// HashedKeyPrefix begins the key of a lane whose value was longer than maxLaneKey: the API shows it
// as a string.
const HashedKeyPrefix = "sha256:"

// orderingPath is the syntax of an ordering key: dotted names of letters, digits, '_' and '-',
// or array indexes, such as "data.id" or "data.items.0.sku".
var orderingPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// MaxOrderingKeyLength bounds an ordering key's path.
const MaxOrderingKeyLength = 200

// CheckOrderingKey says what is wrong with an ordering key's path, nil when nothing is.
func CheckOrderingKey(path string) error {
	switch {
	case path == "":
		return errors.New("must not be empty")
	case len(path) > MaxOrderingKeyLength:
		return fmt.Errorf("must be at most %d characters", MaxOrderingKeyLength)
	case !orderingPath.MatchString(path):
		return errors.New(`must be a dotted path of names into the delivered body, such as "data.id"`)
	}
	return nil
}

// LaneKeyOf returns the lane key of a delivered body (decoded as filter.DecodeBody does, numbers
// exact) under the ordering key path: the JSON text of the string, number or boolean found there,
// NoLaneKey when there is none.
func LaneKeyOf(body any, path string) string {
	v := body
	for name := range strings.SplitSeq(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[name]; !ok {
				return NoLaneKey
			}
		case []any:
			i, err := strconv.Atoi(name)
			if err != nil || i < 0 || i >= len(node) {
				return NoLaneKey
			}
			v = node[i]
		default:
			return NoLaneKey
		}
	}
	var text string
	switch k := v.(type) {
	case string:
		b, _ := json.Marshal(k)
		text = string(b)
	case json.Number:
		text = k.String()
	case bool:
		text = strconv.FormatBool(k)
	default:
		return NoLaneKey
	}
	if len(text) > maxLaneKey {
		sum := sha256.Sum256([]byte(text))
		return HashedKeyPrefix + hex.EncodeToString(sum[:])
	}
	return text
}

// laneSlot is a delivery's place in its lane, as intake assigns it.
type laneSlot struct {
	webhookID int64
	key       string
	laneID    int64
	seq       int64
	// done is the lane's done_seq when the number was taken: the lane had nothing left to make
	// when it is seq-1 (laneQueued).
	done int64
}

// assignLanes gives each delivery to an ordered webhook among hooks its place in its lane: the
// next number of the lane its body's key names. It runs before the event row is inserted, and each
// lane's row stays locked until the transaction ends, so that within a lane the numbers follow
// the events' ids and a transaction's number is taken only after the one before it committed. Lanes
// are taken in (webhook, key) order, so that two events that share two lanes cannot deadlock.
func assignLanes(ctx context.Context, tx bun.Tx, versions EventVersions, ev *Event, hooks []Webhook, now time.Time) ([]laneSlot, error) {
	var slots []laneSlot
	bodies := map[int]any{}
	for _, w := range hooks {
		if w.OrderingKey == nil {
			continue
		}
		version := w.VersionOf(ev.EventType)
		body, ok := bodies[version]
		if !ok {
			var err error
			if body, err = FilterBody(versions, ev, version); err != nil {
				return nil, err
			}
			bodies[version] = body
		}
		slots = append(slots, laneSlot{webhookID: w.ID, key: LaneKeyOf(body, *w.OrderingKey)})
	}
	slices.SortFunc(slots, func(a, b laneSlot) int {
		if a.webhookID != b.webhookID {
			return int(a.webhookID - b.webhookID)
		}
		return strings.Compare(a.key, b.key)
	})
	for i := range slots {
		s := &slots[i]
		lane := &Lane{WebhookID: s.webhookID, Key: s.key, LastSeq: 1, CreatedAt: now, UpdatedAt: now}
		err := tx.NewInsert().Model(lane).ExcludeColumn("id").
			On("CONFLICT (webhook_id, lane_key) DO UPDATE").Set("last_seq = lane.last_seq + 1").Set("updated_at = EXCLUDED.updated_at").
			Returning("id, last_seq, done_seq").Scan(ctx, &s.laneID, &s.seq, &s.done)
		if err != nil {
			return nil, fmt.Errorf("assign lane of webhook %d: %w", s.webhookID, err)
		}
	}
	return slots, nil
}

// unassignLanes gives back the numbers assignLanes took, for an event that was not inserted after
// all (an Idempotency-Key another request holds): the rows are still locked by this transaction, so
// no one took a number since.
func unassignLanes(ctx context.Context, tx bun.Tx, slots []laneSlot) error {
	if len(slots) == 0 {
		return nil
	}
	ids := make([]int64, len(slots))
	for i, s := range slots {
		ids[i] = s.laneID
	}
	_, err := tx.NewUpdate().Model((*Lane)(nil)).Set("last_seq = last_seq - 1").Where("id IN (?)", bun.List(ids)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("give back lane numbers: %w", err)
	}
	return nil
}

// placeInLanes sets each delivery's lane and number from slots, and whether its lane is under
// way (Delivery.LaneQueued).
func placeInLanes(deliveries []Delivery, slots []laneSlot) {
	if len(slots) == 0 {
		return
	}
	for i := range deliveries {
		for _, s := range slots {
			if s.webhookID == deliveries[i].WebhookID {
				deliveries[i].LaneID, deliveries[i].LaneSeq = &s.laneID, &s.seq
				deliveries[i].LaneQueued = s.done < s.seq-1
				break
			}
		}
	}
}

// A lane has not finished a delivery in one of the OpenStates: it is done once delivered, or
// canceled (skipped by its owner, or its webhook deleted).

// AdvanceLane records that a lane finished its delivery number done (done_seq only grows), and
// returns its new head, the first delivery after it not done, for the caller to start (nil when
// the lane has none). The record waits for an intake transaction that holds the lane's row, so the
// head read after it sees that transaction's delivery (docs/ordering.md, "How it works").
func AdvanceLane(ctx context.Context, db bun.IDB, laneID, done int64) (*DeliveryRef, error) {
	if _, err := db.NewUpdate().Model((*Lane)(nil)).Set("done_seq = ?", done).Set("updated_at = ?", Now()).
		Where("id = ?", laneID).Where("done_seq < ?", done).Exec(ctx); err != nil {
		return nil, fmt.Errorf("advance lane %d: %w", laneID, err)
	}
	heads, err := LaneHeadRefs(ctx, db, []int64{laneID})
	if err != nil || len(heads) == 0 {
		return nil, err
	}
	return &heads[0], nil
}

// LaneHeadRefs returns the head of each of the lanes (the first delivery after its done_seq that is
// not done), as a reference to start its workflow by; a lane with no head has none.
func LaneHeadRefs(ctx context.Context, db bun.IDB, laneIDs []int64) ([]DeliveryRef, error) {
	if len(laneIDs) == 0 {
		return nil, nil
	}
	var refs []DeliveryRef
	err := db.NewSelect().TableExpr("deliveries AS d").
		ColumnExpr("d.id AS delivery_id, d.event_id, d.webhook_id, d.state, d.attempts, d.lane_id, d.lane_seq").
		ColumnExpr("e.account_id, e.variant, e.event_type, w.url AS webhook_url").
		Join("JOIN lanes AS l ON l.id = d.lane_id").Join("JOIN webhooks AS w ON w.id = d.webhook_id").Join("JOIN events AS e ON e.id = d.event_id").
		Where("d.lane_id IN (?)", bun.List(laneIDs)).
		Where(`d.lane_seq = (SELECT MIN(h.lane_seq) FROM deliveries AS h WHERE h.lane_id = l.id AND h.lane_seq > l.done_seq AND h.state IN (?))`, bun.List(OpenStates)).
		OrderExpr("d.lane_id ASC").Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("read the heads of lanes: %w", err)
	}
	return refs, nil
}

// LaneView is one lane as its webhook's owner sees it: its key, its numbers, and its head, the
// first of its deliveries not done, which the lane waits for (nil when it waits for none).
type LaneView struct {
	Lane
	Head *LaneHead `bun:"-"`
	// Waiting counts the lane's deliveries behind its head.
	Waiting int64 `bun:"-"`
}

// LaneHead is a lane's head delivery.
type LaneHead struct {
	DeliveryID    int64      `bun:"id"`
	EventID       int64      `bun:"event_id"`
	Seq           int64      `bun:"lane_seq"`
	State         string     `bun:"state"`
	Attempts      int        `bun:"attempts"`
	LastError     *string    `bun:"last_error"`
	NextAttemptAt *time.Time `bun:"next_attempt_at"`
}

// Blocked reports whether the lane is blocked: its head ran out of its schedule, and waits for
// its owner to retry or skip it.
func (v *LaneView) Blocked() bool { return v.Head != nil && v.Head.State == DeliveryExhausted }

// LaneFilter selects a page of a webhook's lanes, by id: those with a head (work not done), or
// only the blocked ones.
type LaneFilter struct {
	Blocked bool
	After   int64
	Limit   int64
}

// ListLanes returns a page of webhookID's lanes that have a head (f.Blocked: whose head is
// exhausted), by id. The caller has checked that the webhook is the scope's.
func ListLanes(ctx context.Context, db bun.IDB, webhookID int64, f LaneFilter) ([]LaneView, error) {
	var lanes []Lane
	q := db.NewSelect().Model(&lanes).Where("webhook_id = ?", webhookID).Where("id > ?", f.After).
		Where("EXISTS (SELECT 1 FROM deliveries AS d WHERE d.lane_id = lane.id AND d.lane_seq > lane.done_seq AND d.state IN (?))",
			bun.List(OpenStates))
	if f.Blocked {
		q = q.Where(`(SELECT d.state FROM deliveries AS d WHERE d.lane_id = lane.id AND d.lane_seq > lane.done_seq AND d.state IN (?)
			ORDER BY d.lane_seq LIMIT 1) = ?`, bun.List(OpenStates), DeliveryExhausted)
	}
	if err := q.OrderExpr("id ASC").Limit(f.Limit).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list lanes of webhook %d: %w", webhookID, err)
	}
	views := make([]LaneView, len(lanes))
	for i := range lanes {
		views[i].Lane = lanes[i]
		if err := views[i].readHead(ctx, db); err != nil {
			return nil, err
		}
	}
	return views, nil
}

// GetLane reads one lane of webhookID with its head; ErrNotFound when the webhook has no such lane.
func GetLane(ctx context.Context, db bun.IDB, webhookID, laneID int64) (*LaneView, error) {
	v := &LaneView{}
	err := db.NewSelect().Model(&v.Lane).Where("id = ?", laneID).Where("webhook_id = ?", webhookID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read lane %d: %w", laneID, err)
	}
	return v, v.readHead(ctx, db)
}

// readHead reads the lane's head and counts the deliveries waiting behind it.
func (v *LaneView) readHead(ctx context.Context, db bun.IDB) error {
	var heads []LaneHead
	err := db.NewSelect().TableExpr("deliveries").Column("id", "event_id", "lane_seq", "state", "attempts", "last_error", "next_attempt_at").
		Where("lane_id = ?", v.ID).Where("lane_seq > ?", v.DoneSeq).Where("state IN (?)", bun.List(OpenStates)).
		OrderExpr("lane_seq ASC").Limit(1).Scan(ctx, &heads)
	if err != nil {
		return fmt.Errorf("read head of lane %d: %w", v.ID, err)
	}
	if len(heads) == 0 {
		v.Head, v.Waiting = nil, 0
		return nil
	}
	v.Head = &heads[0]
	v.Waiting = v.LastSeq - v.Head.Seq
	return nil
}

// SkippedError is the last_error of a delivery its owner skipped to unblock its lane.
const SkippedError = "skipped by its owner to unblock its lane"

// SkipDelivery marks a lane's head delivery canceled, skipped by its owner, unless it was
// delivered meanwhile; it reports whether it did. Its workflow, canceled just before, may have
// marked it canceled already: the reason is added.
func SkipDelivery(ctx context.Context, db bun.IDB, deliveryID int64, now time.Time) (bool, error) {
	res, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryCanceled).Set("last_error = ?", SkippedError).
		Set("next_attempt_at = NULL").Set("updated_at = ?", now).
		Where("id = ?", deliveryID).Where("state <> ?", DeliveryDelivered).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("skip delivery %d: %w", deliveryID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ordered reports whether any of hooks is ordered.
func ordered(hooks []Webhook) bool {
	return slices.ContainsFunc(hooks, func(w Webhook) bool { return w.OrderingKey != nil })
}

// laneOf is d's lane id, 0 when it has none.
func laneOf(d Delivery) int64 {
	if d.LaneID == nil {
		return 0
	}
	return *d.LaneID
}

// StaleLanes returns the heads of up to limit lanes that have deliveries after their last finished
// one and whose row has not moved since olderThan, and moves their updated_at to now, so that each
// is returned once per period. The head's workflow is running (blocked, or slow) or is not (it
// failed, or a start was lost): the worker's sweeper starts each, a duplicate start being refused
// (worker.Sweep).
func StaleLanes(ctx context.Context, db bun.IDB, olderThan, now time.Time, limit int64) ([]DeliveryRef, error) {
	var ids []int64
	err := inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().TableExpr("lanes AS l").Column("l.id").Join("JOIN webhooks AS w ON w.id = l.webhook_id").
			Where("l.last_seq > l.done_seq").Where("l.updated_at < ?", olderThan).Where("w.deleted_at IS NULL").
			OrderExpr("l.updated_at ASC").Limit(limit).Scan(ctx, &ids)
		if err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.NewUpdate().Model((*Lane)(nil)).Set("updated_at = ?", now).Where("id IN (?)", bun.List(ids)).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("find stale lanes: %w", err)
	}
	return LaneHeadRefs(ctx, db, ids)
}

// seqOf is d's number in its lane, 0 when it has none.
func seqOf(d Delivery) int64 {
	if d.LaneSeq == nil {
		return 0
	}
	return *d.LaneSeq
}

// DeliveryLaneKey returns the key of delivery id's lane as stored (LaneKeyOf), NoLaneKey when the
// delivery is in no lane.
func DeliveryLaneKey(ctx context.Context, db bun.IDB, id int64) (string, error) {
	var keys []string
	err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN lanes AS l ON l.id = d.lane_id").
		ColumnExpr("l.lane_key").Where("d.id = ?", id).Scan(ctx, &keys)
	if err != nil {
		return NoLaneKey, fmt.Errorf("lane key of delivery %d: %w", id, err)
	}
	if len(keys) == 0 {
		return NoLaneKey, nil
	}
	return keys[0], nil
}
