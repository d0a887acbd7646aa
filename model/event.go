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
	// LaneID and LaneSeq are the delivery's lane and its number in it, when its webhook is ordered
	// (Lane); nil otherwise.
	LaneID  *int64 `bun:"lane_id"`
	LaneSeq *int64 `bun:"lane_seq"`
	// LaneQueued, set by intake only, says that the delivery's lane had deliveries not yet
	// finished when it took its number: the lane's workflow reads this one after them, and needs no
	// wake (docs/ordering.md, "How it works").
	LaneQueued bool      `bun:"-"`
	CreatedAt  time.Time `bun:"created_at,notnull"`
	UpdatedAt  time.Time `bun:"updated_at,notnull"`
}

// NewEvent describes an event to publish.
type NewEvent struct {
	AccountID int64
	Variant   Variant
	EventType string
	// Data must already be canonical JSON.
	Data string
	// Version is the version of EventType's shape Data is written in; 0 is the newest in the
	// table of versions it is published with (LatestVersion), the only one intake accepts and the
	// one emitters write.
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
	// OccurredAt is the event's instant, its body's timestamp; zero: when its transaction stores
	// it. JudgeFilters sets it, since the bodies it judges carry it.
	OccurredAt time.Time
	// Verdicts are its subscribers' payload filters judged before its transaction began
	// (JudgeFilters); nil: they are judged in it.
	Verdicts *filter.Verdicts
	// At is when it is stored: the event's and its deliveries' created_at, and the instant its
	// idempotency key's window is measured to; zero: Now, as its transaction begins. ChangeSet.Emit
	// sets it from the change's Clock.
	At time.Time
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
	// Overran lists the webhooks that the event reached unjudged because their payload filter ran
	// out of its budget (filter.Overrun); they count among Deliveries.
	Overran []int64
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
// so what arrived while it was disabled is kept for a manual retry. It knows no versions of event
// types (LatestVersion with none): a publish that knows them goes through Change.
func InsertEvent(ctx context.Context, db bun.IDB, ne NewEvent) (*PublishResult, error) {
	return insertEvent(ctx, db, statementsOf(db), nil, ne)
}

// insertEvent is InsertEvent with the statements s of db's database and the table of versions
// that gives ne's version when it has none and converts its bodies for its subscribers' filters.
func insertEvent(ctx context.Context, db bun.IDB, s *statements, versions EventVersions, ne NewEvent) (*PublishResult, error) {
	// Prepared before the transaction begins, not inside it: see statements.prepare.
	if err := s.prepare(ctx, db); err != nil {
		return nil, err
	}
	var res *PublishResult
	err := inTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
		now := ne.At
		if now.IsZero() {
			now = Now()
		}
		if ne.IdempotencyKey != "" {
			prev, err := findIdempotent(ctx, tx, ne, now)
			if err != nil || prev != nil {
				res = prev
				return err
			}
		}
		// The subscribers first, so that the event row is written once, with its matched count.
		hooks, err := subscribers(ctx, tx, s, ne)
		if err != nil {
			return err
		}
		all := len(hooks)
		ev := ne.event(now, versions)
		var overran []int64
		if filtered(ne) {
			verdicts := ne.Verdicts
			if verdicts == nil {
				verdicts = filterVerdicts(versions, ev)
			}
			hooks, overran = passFilters(ev.EventType, hooks, verdicts)
		}
		ev.Matched, ev.Filtered = len(hooks), all-len(hooks)
		insert := s.text.insertEvent
		if ne.IdempotencyKey != "" {
			ev.IdempotencyKey, ev.RequestHash = &ne.IdempotencyKey, &ne.RequestHash
			// Two requests with one key can both find it new. On PostgreSQL the second insert
			// waits for the first transaction and then, instead of failing on the unique index,
			// inserts nothing; the winner's event is then read back below.
			insert = s.text.insertIdempotentEvent
		}
		// An ordered webhook's lanes are taken before the event's id is (docs/ordering.md). A test
		// event or a notice is in no lane: neither is an event of the receiver's entities.
		var lanes []laneSlot
		if filtered(ne) && ordered(hooks) {
			if lanes, err = assignLanes(ctx, tx, versions, ev, hooks, now); err != nil {
				return err
			}
		}
		id, err := s.insertRow(ctx, tx, insert, fieldValues(s.text.eventFields, ev)...)
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		if id == 0 {
			if err := unassignLanes(ctx, tx, lanes); err != nil {
				return err
			}
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
		placeInLanes(deliveries, lanes)
		if err := insertDeliveries(ctx, tx, s, deliveries); err != nil {
			return fmt.Errorf("insert deliveries: %w", err)
		}
		res = &PublishResult{Event: ev, Deliveries: deliveries, Overran: overran, urls: urls}
		return nil
	})
	return res, err
}

// event is the row ne stores when its transaction runs at now, in the newest version of its type
// in versions when it names none.
func (ne NewEvent) event(now time.Time, versions EventVersions) *Event {
	ev := &Event{
		AccountID: ne.AccountID, Variant: ne.Variant, EventType: ne.EventType, Data: ne.Data, Version: ne.Version,
		OccurredAt: ne.OccurredAt, CreatedAt: now,
	}
	if ev.OccurredAt.IsZero() {
		ev.OccurredAt = now
	}
	if ev.Version == 0 {
		ev.Version = LatestVersion(versions, ne.EventType)
	}
	if ne.Notice != 0 {
		ev.AboutWebhookID = &ne.Notice
	}
	return ev
}

// subscribers reads the webhooks ne reaches, each with its URL, its payload filter and the version
// of ne's type it receives: its event type's subscribers, its one webhook (OnlyWebhook), or its
// channels (a notice).
func subscribers(ctx context.Context, db bun.IDB, s *statements, ne NewEvent) ([]Webhook, error) {
	if ne.Notice != 0 {
		return ne.Channels, nil
	}
	var hooks []Webhook
	query, only := s.text.subscribers, any(ne.EventType)
	if ne.OnlyWebhook != 0 {
		query, only = s.text.onlyWebhook, ne.OnlyWebhook
	}
	if err := s.query(ctx, db, &hooks, query, ne.AccountID, ne.Variant, only); err != nil {
		return nil, fmt.Errorf("find subscribers: %w", err)
	}
	return hooks, nil
}

// filtered reports whether ne's subscribers' payload filters judge it: the test event is the
// receiver's check, not the filter's, and always reaches its webhook; a notice goes to channels,
// which have no filter.
func filtered(ne NewEvent) bool {
	return ne.OnlyWebhook == 0 && ne.Notice == 0
}

// JudgeFilters judges the payload filters of ne's subscribers, as they are now, on ne's body, and
// keeps the verdicts in ne for its transaction (docs/filters.md, "When it runs"). The caller runs
// it before the transaction begins, so that no lock is held while filters run: the transaction
// reads the subscribers again and judges only a filter text (or version) that is new since, within
// what is left of the publish's budget. It fixes ne.OccurredAt, the instant the bodies carry. It
// does nothing for an event that is not filtered, or when no subscriber has a filter. versions is
// the table the event is published with: it gives ne's version when ne names none, and converts its
// data for a subscriber pinned to an older version.
func JudgeFilters(ctx context.Context, db bun.IDB, versions EventVersions, ne *NewEvent) error {
	if !filtered(*ne) {
		return nil
	}
	s := statementsOf(db)
	var filters []subscriberFilter
	if err := s.query(ctx, db, &filters, s.text.filters, ne.AccountID, ne.Variant, ne.EventType); err != nil {
		return fmt.Errorf("find subscribers' filters: %w", err)
	}
	if len(filters) == 0 {
		return nil
	}
	if ne.OccurredAt.IsZero() {
		ne.OccurredAt = Now()
	}
	ne.Verdicts = filterVerdicts(versions, ne.event(ne.OccurredAt, versions))
	for _, f := range filters {
		ne.Verdicts.Of(f.Filter, f.Version)
	}
	return nil
}

// subscriberFilter is a payload filter of an event type's subscribers, and the version of the type
// its webhooks receive (JudgeFilters).
type subscriberFilter struct {
	Filter  string `bun:"filter"`
	Version int    `bun:"version"`
}

// filterVerdicts judges filters on ev's bodies (FilterBody), converted by versions.
func filterVerdicts(versions EventVersions, ev *Event) *filter.Verdicts {
	return filter.NewVerdicts(func(version int) (any, error) { return FilterBody(versions, ev, version) })
}

// passFilters keeps, in place, the hooks whose payload filter passes an event of eventType, each
// judged on the body of the version it receives (docs/filters.md); overran lists those that pass
// unjudged because their filter ran out of its budget. What webhookd cannot judge passes
// (filter.Verdicts).
func passFilters(eventType string, hooks []Webhook, verdicts *filter.Verdicts) (kept []Webhook, overran []int64) {
	kept = hooks[:0]
	for _, w := range hooks {
		if w.Filter != nil {
			switch verdicts.Of(*w.Filter, w.VersionOf(eventType)) {
			case filter.Refuse:
				continue
			case filter.Overrun:
				overran = append(overran, w.ID)
			}
		}
		kept = append(kept, w)
	}
	return kept, overran
}

// FilterBody is ev's delivery body as a payload filter reads it (docs/filters.md): what a receiver
// of that version of ev's type gets (0: the version ev is written in), without a signature, decoded
// with its numbers exact. versions converts ev's data to an older version.
func FilterBody(versions EventVersions, ev *Event, version int) (any, error) {
	data, err := ev.DataAt(versions, version)
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
	// LaneID is the delivery's lane when its webhook is ordered (0: none): its workflow is the
	// lane's to start, in turn. LaneQueued: its lane is under way and reads it without a wake
	// (Delivery.LaneQueued).
	LaneID     int64 `bun:"lane_id"`
	LaneQueued bool  `bun:"-"`
}

// Refs returns the references of the deliveries a publish stored.
func (r *PublishResult) Refs() []DeliveryRef {
	refs := make([]DeliveryRef, len(r.Deliveries))
	for i, d := range r.Deliveries {
		refs[i] = DeliveryRef{DeliveryID: d.ID, EventID: d.EventID, WebhookID: d.WebhookID, AccountID: r.Event.AccountID,
			Variant: r.Event.Variant, EventType: r.Event.EventType, WebhookURL: r.urls[d.WebhookID], State: d.State, Attempts: d.Attempts,
			LaneID: laneOf(d), LaneQueued: d.LaneQueued}
	}
	return refs
}

// UndispatchedDeliveries returns deliveries created before olderThan whose workflow was never
// started: the outbox a crash left behind.
//
// Accounts take turns: the oldest of each account first, then the second oldest of each, and so
// on, so that one account's backlog of thousands does not hold back another account's one
// delivery that missed its start.
func UndispatchedDeliveries(ctx context.Context, db bun.IDB, olderThan time.Time, limit int64) ([]DeliveryRef, error) {
	return readRefs(ctx, db, DeliveryQuery{Undispatched: true, Until: olderThan, Order: AccountTurns, Limit: limit},
		"find undispatched deliveries")
}

// ClaimedRef is a delivery a claim holds, with the time of the claim.
type ClaimedRef struct {
	DeliveryRef
	ClaimedAt time.Time `bun:"claimed_at"`
}

// StaleClaims returns up to limit deliveries claimed before olderThan, oldest claim first: those a
// process claimed for a retry and died before it handed them to their workflows.
func StaleClaims(ctx context.Context, db bun.IDB, olderThan time.Time, limit int64) ([]ClaimedRef, error) {
	page, err := ReadDeliveries(ctx, db, DeliveryQuery{ClaimedBefore: olderThan, Order: ClaimOrder, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("find stale claims: %w", err)
	}
	refs := make([]ClaimedRef, len(page.Views))
	for i := range page.Views {
		refs[i] = ClaimedRef{DeliveryRef: page.Views[i].Ref(), ClaimedAt: *page.Views[i].ClaimedAt}
	}
	return refs, nil
}
