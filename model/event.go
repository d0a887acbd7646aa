package model

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/wire"
)

// ErrIdempotencyConflict is returned when an Idempotency-Key is reused with a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

// IdempotencyWindow is how long an Idempotency-Key is remembered.
const IdempotencyWindow = 24 * time.Hour

// Event is one accepted occurrence of an event type. Data is canonical JSON: exactly the bytes
// delivered as the body's data.
type Event struct {
	bun.BaseModel `bun:"table:events"`

	ID        int64   `bun:"id,pk,autoincrement"`
	AccountID int64   `bun:"account_id,notnull"`
	Variant   Variant `bun:"variant,notnull"`
	EventType string  `bun:"event_type,notnull"`
	Data      string  `bun:"data,notnull"`
	// Version is the version of EventType's data shape that Data is written in (docs/events.md,
	// "Versions"): the newest when the event was accepted. A webhook pinned to an older one gets
	// the data converted down (DataFor).
	Version        int     `bun:"version,notnull"`
	IdempotencyKey *string `bun:"idempotency_key"`
	RequestHash    *string `bun:"request_hash"`
	Matched        int     `bun:"matched,notnull"`
	// Filtered counts the webhooks subscribed to the event's type whose payload filters refused
	// it when it was accepted: they got no delivery (Matched leaves them out).
	Filtered int `bun:"filtered,notnull"`
	// AboutWebhookID is set on a notice (docs/notifications.md): the webhook it is about. Notices
	// go to notification endpoints only and never show in the event log.
	AboutWebhookID *int64    `bun:"about_webhook_id"`
	OccurredAt     time.Time `bun:"occurred_at,notnull"`
	CreatedAt      time.Time `bun:"created_at,notnull"`
}

// Delivery is one event for one webhook: the unit a DeliveryWorkflow owns.
type Delivery struct {
	bun.BaseModel `bun:"table:deliveries"`

	ID            int64      `bun:"id,pk,autoincrement"`
	EventID       int64      `bun:"event_id,notnull"`
	WebhookID     int64      `bun:"webhook_id,notnull"`
	State         string     `bun:"state,notnull"`
	Attempts      int        `bun:"attempts,notnull"`
	LastError     *string    `bun:"last_error"`
	NextAttemptAt *time.Time `bun:"next_attempt_at"`
	DispatchedAt  *time.Time `bun:"dispatched_at"`
	// ClaimedAt is set while a manual retry hands the delivery to its workflow (ClaimDelivery).
	ClaimedAt *time.Time `bun:"claimed_at"`
	CreatedAt time.Time  `bun:"created_at,notnull"`
	UpdatedAt time.Time  `bun:"updated_at,notnull"`
}

// NewEvent describes an event to publish.
type NewEvent struct {
	AccountID int64
	Variant   Variant
	EventType string
	// Data must already be canonical JSON.
	Data string
	// Version is the version of EventType's shape Data is written in; 0 is the newest
	// (LatestVersion), the only one intake accepts and the one emitters write.
	Version int
	// IdempotencyKey and RequestHash are optional; RequestHash identifies the request body so a
	// reused key with another body is refused.
	IdempotencyKey string
	RequestHash    string
	// OnlyWebhook, when set, delivers to that webhook alone (the test event after registration)
	// instead of to every subscriber.
	OnlyWebhook int64
	// Notice, when set, makes the event a notice about that webhook, delivered to Channels alone.
	Notice   int64
	Channels []Webhook
}

// TestEventData is the data of an EventTest event, the one shape of it: the data tags are the
// intake rules that package sources reads from every event type's struct.
type TestEventData struct {
	Message   string `json:"message" data:"text"`
	WebhookID int64  `json:"webhookId" data:"id"`
}

// WebhookTestEvent is the EventTest event a webhook receives after registration when its variant
// sends one (VariantSpec.TestEvent; spec 6.3), and on request.
func WebhookTestEvent(w *Webhook) NewEvent {
	data, _ := json.Marshal(TestEventData{Message: "This is a test event from webhookd: your webhook is registered.", WebhookID: w.ID})
	return NewEvent{AccountID: w.AccountID, Variant: w.Variant, EventType: EventTest, Data: string(data), OnlyWebhook: w.ID}
}

// PublishResult is what publishing stored.
type PublishResult struct {
	Event      *Event
	Deliveries []Delivery
	// Replayed is true when an earlier request with the same Idempotency-Key is answered again.
	Replayed bool
	// urls holds the URL of each delivery's webhook, by webhook id, for Refs.
	urls map[int64]string
}

// HashRequest identifies a request body for idempotency checks.
func HashRequest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// InsertEvent stores an event and one pending delivery per subscribed webhook in one transaction
// (db may already be one: a domain change and its event commit together). Deliveries are the
// outbox: the caller starts their workflows after commit, and the worker's sweeper starts any that a
// crash left behind. A disabled webhook gets its delivery too: the attempt holds it without posting,
// so what arrived while it was disabled is kept for a manual retry.
func InsertEvent(ctx context.Context, db bun.IDB, ne NewEvent) (*PublishResult, error) {
	return insertEvent(ctx, db, statementsOf(db), ne)
}

// insertEvent is InsertEvent with the statements s of db's database.
func insertEvent(ctx context.Context, db bun.IDB, s *statements, ne NewEvent) (*PublishResult, error) {
	// Prepared before the transaction begins, not inside it: see statements.prepare.
	if err := s.prepare(ctx, db); err != nil {
		return nil, err
	}
	var res *PublishResult
	err := inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		now := Now()
		if ne.IdempotencyKey != "" {
			prev, err := findIdempotent(ctx, tx, ne, now)
			if err != nil || prev != nil {
				res = prev
				return err
			}
		}
		// The subscribers first, so that the event row is written once, with its matched count.
		var hooks []Webhook
		query, only := s.text.subscribers, any(ne.EventType)
		if ne.OnlyWebhook != 0 {
			query, only = s.text.onlyWebhook, ne.OnlyWebhook
		}
		if ne.Notice != 0 {
			hooks = ne.Channels
		} else if err := s.query(ctx, tx, &hooks, query, ne.AccountID, ne.Variant, only); err != nil {
			return fmt.Errorf("find subscribers: %w", err)
		}
		all := len(hooks)
		ev := &Event{
			AccountID: ne.AccountID, Variant: ne.Variant, EventType: ne.EventType, Data: ne.Data, Version: ne.Version,
			OccurredAt: now, CreatedAt: now,
		}
		if ev.Version == 0 {
			ev.Version = LatestVersion(ne.EventType)
		}
		if ne.OnlyWebhook == 0 && ne.Notice == 0 {
			// The test event is the receiver's check, not the filter's: it always reaches its webhook.
			hooks = passFilters(ev, hooks)
		}
		ev.Matched, ev.Filtered = len(hooks), all-len(hooks)
		if ne.Notice != 0 {
			ev.AboutWebhookID = &ne.Notice
		}
		insert := s.text.insertEvent
		if ne.IdempotencyKey != "" {
			ev.IdempotencyKey, ev.RequestHash = &ne.IdempotencyKey, &ne.RequestHash
			// Two requests with one key can both find it new. On PostgreSQL the second insert
			// waits for the first transaction and then, instead of failing on the unique index,
			// inserts nothing; the winner's event is then read back below.
			insert = s.text.insertIdempotentEvent
		}
		id, err := s.insertRow(ctx, tx, insert, fieldValues(s.text.eventFields, ev)...)
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		if id == 0 {
			// The conflicting row is committed now (read committed: this statement's snapshot
			// sees it), so the request is answered as the winner's replay, or refused as a
			// reuse with another body.
			prev, err := findIdempotent(ctx, tx, ne, now)
			if err == nil && prev == nil {
				err = errors.New("idempotency key conflicted but no event holds it")
			}
			res = prev
			return err
		}
		ev.ID = id
		deliveries := make([]Delivery, len(hooks))
		urls := make(map[int64]string, len(hooks))
		for i, w := range hooks {
			deliveries[i] = Delivery{EventID: ev.ID, WebhookID: w.ID, CreatedAt: now, UpdatedAt: now}
			urls[w.ID] = w.URL
		}
		if err := insertDeliveries(ctx, tx, s, deliveries); err != nil {
			return fmt.Errorf("insert deliveries: %w", err)
		}
		res = &PublishResult{Event: ev, Deliveries: deliveries, urls: urls}
		return nil
	})
	return res, err
}

// passFilters keeps the hooks whose payload filter passes the event's body as each receiver would
// get it without its signature (docs/filters.md), its data in that webhook's version: a body is
// built and decoded once per version, and only when a hook has a filter. A stored filter that no
// longer compiles passes, and so does an event whose data cannot be converted to a webhook's
// version: an event is never lost to a filter webhookd itself cannot judge (the delivery reports
// the conversion's failure).
func passFilters(ev *Event, hooks []Webhook) []Webhook {
	type decoded struct {
		version int
		body    any
	}
	var bodies []decoded // one per version met, most often one
	bodyAt := func(version int) (any, error) {
		for _, d := range bodies {
			if d.version == version {
				return d.body, nil
			}
		}
		body, err := FilterBody(ev, version)
		if err == nil {
			bodies = append(bodies, decoded{version, body})
		}
		return body, err
	}
	kept := hooks[:0]
	for _, w := range hooks {
		if w.Filter == nil {
			kept = append(kept, w)
			continue
		}
		f, err := filter.Cached(*w.Filter)
		var body any
		if err == nil {
			body, err = bodyAt(w.VersionOf(ev.EventType))
		}
		if err != nil || f.Match(body) {
			kept = append(kept, w)
		}
	}
	return kept
}

// FilterBody is ev's delivery body as a payload filter reads it (docs/filters.md): what a receiver
// of that version of ev's type gets (0: the version ev is written in), without a signature, decoded
// with its numbers exact.
func FilterBody(ev *Event, version int) (any, error) {
	data, err := ev.DataAt(version)
	if err != nil {
		return nil, err
	}
	return filter.DecodeBody(wire.LoggedBody(ev.Variant.Spec().Body, ev.EventType, data, ev.OccurredAt))
}

// findIdempotent returns the earlier answer for a reused key, ErrIdempotencyConflict for a reused
// key with another body, or nil when the key is new (or its 24 hours are over, which frees it).
func findIdempotent(ctx context.Context, tx bun.Tx, ne NewEvent, now time.Time) (*PublishResult, error) {
	prev := &Event{}
	err := tx.NewSelect().Model(prev).
		Where("account_id = ?", ne.AccountID).Where("variant = ?", ne.Variant).Where("idempotency_key = ?", ne.IdempotencyKey).
		Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find idempotency key: %w", err)
	}
	if now.Sub(prev.CreatedAt) > IdempotencyWindow {
		if _, err := tx.NewUpdate().Model(prev).Set("idempotency_key = NULL").WherePK().Exec(ctx); err != nil {
			return nil, fmt.Errorf("expire idempotency key: %w", err)
		}
		return nil, nil
	}
	if prev.RequestHash == nil || *prev.RequestHash != ne.RequestHash {
		return nil, ErrIdempotencyConflict
	}
	var deliveries []Delivery
	if err := tx.NewSelect().Model(&deliveries).Where("event_id = ?", prev.ID).OrderExpr("id ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("load deliveries: %w", err)
	}
	return &PublishResult{Event: prev, Deliveries: deliveries, Replayed: true}, nil
}

// MarkDispatched records that the workflows of these deliveries exist.
func MarkDispatched(ctx context.Context, db bun.IDB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("dispatched_at = ?", Now()).
		Where("id IN (?)", bun.List(ids)).Where("dispatched_at IS NULL").Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark dispatched: %w", err)
	}
	return nil
}

// DeliveryRef is what starting a delivery workflow needs.
type DeliveryRef struct {
	DeliveryID int64   `bun:"delivery_id"`
	EventID    int64   `bun:"event_id"`
	WebhookID  int64   `bun:"webhook_id"`
	AccountID  int64   `bun:"account_id"`
	Variant    Variant `bun:"variant"`
	EventType  string  `bun:"event_type"`
	// WebhookURL names the receiver in the workflow's summary (only its host is shown there).
	WebhookURL string `bun:"webhook_url"`
	// State and Attempts are the delivery's when the reference was read.
	State    string `bun:"state"`
	Attempts int    `bun:"attempts"`
}

// Refs returns the references of the deliveries a publish stored.
func (r *PublishResult) Refs() []DeliveryRef {
	refs := make([]DeliveryRef, len(r.Deliveries))
	for i, d := range r.Deliveries {
		refs[i] = DeliveryRef{DeliveryID: d.ID, EventID: d.EventID, WebhookID: d.WebhookID, AccountID: r.Event.AccountID,
			Variant: r.Event.Variant, EventType: r.Event.EventType, WebhookURL: r.urls[d.WebhookID], State: d.State, Attempts: d.Attempts}
	}
	return refs
}

// selectRefs selects DeliveryRefs: deliveries (d) with their event's account, variant and type (e)
// and their webhook's URL (w).
func selectRefs(db bun.IDB) *bun.SelectQuery {
	return db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		Join("JOIN webhooks AS w ON w.id = d.webhook_id").
		ColumnExpr("d.id AS delivery_id, d.event_id, d.webhook_id, e.account_id, e.variant, e.event_type, w.url AS webhook_url, d.state, d.attempts")
}

// UndispatchedDeliveries returns deliveries created before olderThan whose workflow was never
// started: the outbox a crash left behind.
//
// Accounts take turns: the oldest of each account first, then the second oldest of each, and so
// on, so that one account's backlog of thousands does not hold back another account's one
// delivery that missed its start.
func UndispatchedDeliveries(ctx context.Context, db bun.IDB, olderThan time.Time, limit int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	turns := selectRefs(db).ColumnExpr("ROW_NUMBER() OVER (PARTITION BY e.account_id ORDER BY d.id) AS turn").
		Where("d.dispatched_at IS NULL").Where("d.created_at < ?", olderThan)
	err := db.NewSelect().TableExpr("(?) AS u", turns).
		ColumnExpr("delivery_id, event_id, webhook_id, account_id, variant, event_type, webhook_url, state, attempts").
		OrderExpr("turn ASC, delivery_id ASC").Limit(limit).Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find undispatched deliveries: %w", err)
	}
	return refs, nil
}

// CountExhausted counts the exhausted deliveries of a webhook, for a manual retry of them, and
// returns the largest of their ids (0 when there are none): the retry covers those and not the
// deliveries that are exhausted after it was asked for.
func CountExhausted(ctx context.Context, db bun.IDB, webhookID int64) (count int, upTo int64, err error) {
	var row struct {
		N   int   `bun:"n"`
		Max int64 `bun:"max_id"`
	}
	err = db.NewSelect().TableExpr("deliveries AS d").ColumnExpr("COUNT(*) AS n, COALESCE(MAX(d.id), 0) AS max_id").
		Where("d.webhook_id = ?", webhookID).Where("d.state = ?", DeliveryExhausted).Scan(ctx, &row)
	if err != nil {
		return 0, 0, fmt.Errorf("count exhausted deliveries: %w", err)
	}
	return row.N, row.Max, nil
}

// ExhaustedDeliveries returns up to limit exhausted deliveries of a webhook with ids above after
// and at most upTo, in id order: one batch of a manual retry.
func ExhaustedDeliveries(ctx context.Context, db bun.IDB, webhookID, upTo, after, limit int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	err := selectRefs(db).Where("d.webhook_id = ?", webhookID).Where("d.state = ?", DeliveryExhausted).
		Where("d.id > ?", after).Where("d.id <= ?", upTo).OrderExpr("d.id ASC").Limit(limit).Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find exhausted deliveries: %w", err)
	}
	return refs, nil
}

// ClaimedRef is a delivery a claim holds, with the time of the claim.
type ClaimedRef struct {
	DeliveryRef
	ClaimedAt time.Time `bun:"claimed_at"`
}

// StaleClaims returns up to limit deliveries claimed before olderThan, oldest claim first: those a
// process claimed for a retry and died before it handed them to their workflows.
func StaleClaims(ctx context.Context, db bun.IDB, olderThan time.Time, limit int64) ([]ClaimedRef, error) {
	var refs []ClaimedRef
	err := selectRefs(db).ColumnExpr("d.claimed_at").Where("d.claimed_at < ?", olderThan).
		OrderExpr("d.claimed_at ASC, d.id ASC").Limit(limit).Scan(ctx, &refs)
	if err != nil {
		return nil, fmt.Errorf("find stale claims: %w", err)
	}
	return refs, nil
}

// EventDeliveryRefs returns the deliveries of one event, in id order: what a fan-out starts.
func EventDeliveryRefs(ctx context.Context, db bun.IDB, eventID int64) ([]DeliveryRef, error) {
	var refs []DeliveryRef
	if err := selectRefs(db).Where("d.event_id = ?", eventID).OrderExpr("d.id ASC").Scan(ctx, &refs); err != nil {
		return nil, fmt.Errorf("find the deliveries of event %d: %w", eventID, err)
	}
	return refs, nil
}
