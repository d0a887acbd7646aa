package model

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// DeliveryQuery is the one read of deliveries: every list, page, lookup and sweep of them is a
// value of it, served by ReadDeliveries (and counted by CountDeliveries). Zero fields select
// nothing out.
type DeliveryQuery struct {
	// Scope, when set, reads only the deliveries of the scope's live webhooks (its account, its
	// variant, its kind, not deleted): what a client reads, through the use cases. Nil reads every
	// account's deliveries, deleted webhooks' included: the worker's sweeps and the engine's own
	// reads.
	Scope      *WebhookScope
	WebhookID  int64
	EventID    int64
	DeliveryID int64
	// DeliveryIDs, when set, keeps the deliveries of these ids.
	DeliveryIDs []int64
	// States, when set, keeps the deliveries in one of them.
	States []string
	// WebhookIDs, when set, keeps the deliveries of one of these webhooks; EventTypes, of one of
	// these event types.
	WebhookIDs []int64
	EventTypes []string
	// StatusClasses, when set, keeps the deliveries whose last attempt is in one of them
	// (StatusClasses, statusClassSQL): what the receiver last answered, or why it could not.
	StatusClasses []string
	// Since (inclusive) and Until (exclusive) bound the deliveries' created_at when set.
	Since, Until time.Time
	// Undispatched keeps the deliveries whose workflow was never started (dispatched_at NULL);
	// ClaimedBefore, when set, those claimed before it.
	Undispatched  bool
	ClaimedBefore time.Time
	// The cursor: ids above After, below Before, at most UpTo, each when set.
	After, Before, UpTo int64
	Order               DeliveryOrder
	// Limit, when set, bounds the page; More then says whether rows are left.
	Limit int64
	// MaxBytes, when set, bounds the page by the bytes its attempt logs carry (response bodies,
	// request headers, errors) as well: it ends before the delivery that would take it past
	// MaxBytes, and always holds at least one delivery. The attempts of deliveries that do not fit
	// are never read.
	MaxBytes int64
	Include  DeliveryInclude
}

// The status classes of a delivery, judged on its last attempt (the delivery_attempts row whose
// attempt is the delivery's attempts): every delivery is in exactly one (docs/api.md, "The delivery
// log across webhooks").
const (
	// Status2xx to Status5xx: the last attempt got an HTTP answer of that hundred.
	Status2xx = "2xx"
	Status3xx = "3xx"
	Status4xx = "4xx"
	Status5xx = "5xx"
	// StatusTimeout: no answer in time (error class timeout, no status).
	StatusTimeout = "timeout"
	// StatusTLS: the TLS handshake failed (error class tls, no status).
	StatusTLS = "tls"
	// StatusNetwork: the exchange failed before an answer for another reason of the network
	// (NetworkErrorClasses, no status).
	StatusNetwork = "network"
	// StatusOther: anything else: no status and a class that is not the network's (a token
	// endpoint that failed, a broker's or a mail server's refusal, a class added later), or a
	// status outside 200 to 599.
	StatusOther = "other"
	// StatusNone: no attempt yet.
	StatusNone = "none"
)

// StatusClasses are every status class, in the order the API lists them.
var StatusClasses = []string{Status2xx, Status3xx, Status4xx, Status5xx, StatusTimeout, StatusTLS, StatusNetwork, StatusOther, StatusNone}

// NetworkErrorClasses are the attempt error classes (activities/egress) of an exchange that failed
// before the receiver answered, other than a timeout or TLS: StatusNetwork. A test in activities
// checks that every class it records is named here or known to be StatusOther.
var NetworkErrorClasses = []string{"refused", "dns", "network", "blocked", "circuit_open", "proxy", "proxy_upstream", "response_too_large"}

// DeliveryOrder orders a read of deliveries.
type DeliveryOrder int

const (
	// OldestFirst orders by id, ascending: what a sweep or a batch walks.
	OldestFirst DeliveryOrder = iota
	// NewestFirst orders by id, descending: a delivery log's page.
	NewestFirst
	// ClaimOrder orders by claimed_at, then id: the oldest claim first.
	ClaimOrder
	// AccountTurns lets accounts take turns: the oldest of each account first, then the second
	// oldest of each, and so on, so that one account's backlog does not hold back another's.
	AccountTurns
)

// DeliveryInclude says what a read carries beyond the delivery and its event's and webhook's
// names (DeliveryView).
type DeliveryInclude uint8

const (
	// IncludeAttempts fills in each delivery's attempt log (DeliveryView.Log), in attempt order.
	IncludeAttempts DeliveryInclude = 1 << iota
	// IncludeEvent fills in the event's data, version and time, from which the body is rebuilt
	// (DeliveryView.Event).
	IncludeEvent
)

// DeliveryView is a delivery as every read of them returns it: with its event's account, variant
// and type and its webhook's URL; with the event's data, version and time (IncludeEvent), and with
// its attempts (IncludeAttempts).
type DeliveryView struct {
	Delivery
	AccountID  int64   `bun:"account_id"`
	Variant    Variant `bun:"variant"`
	EventType  string  `bun:"event_type"`
	WebhookURL string  `bun:"webhook_url"`
	// WebhookVersion is the version of the event's type the webhook receives (Webhook.VersionOf):
	// what rebuilds the body it gets.
	WebhookVersion int `bun:"webhook_version"`
	// Set with IncludeEvent.
	EventData       string    `bun:"event_data"`
	EventOccurredAt time.Time `bun:"event_occurred_at"`
	EventVersion    int       `bun:"event_version"`
	// Log is set with IncludeAttempts.
	Log []Attempt `bun:"-"`
}

// Ref is what starting the view's delivery workflow needs.
func (v *DeliveryView) Ref() DeliveryRef {
	return DeliveryRef{DeliveryID: v.ID, EventID: v.EventID, WebhookID: v.WebhookID, AccountID: v.AccountID,
		Variant: v.Variant, EventType: v.EventType, WebhookURL: v.WebhookURL, State: v.State, Attempts: v.Attempts,
		LaneID: laneOf(v.Delivery), LaneSeq: seqOf(v.Delivery)}
}

// Event is the event of a view read with IncludeEvent, as far as it carries it: what rebuilds its
// body.
func (v *DeliveryView) Event(variant Variant) *Event {
	return &Event{ID: v.EventID, Variant: variant, EventType: v.EventType, Data: v.EventData, Version: v.EventVersion, OccurredAt: v.EventOccurredAt}
}

// DeliveryPage is one page of deliveries. More says that further deliveries come after Last, the
// id of the page's last delivery (the last one planned, should a purge remove it meanwhile); it is
// only known when the query had a Limit.
type DeliveryPage struct {
	Views []DeliveryView
	More  bool
	Last  int64
}

// Refs returns the references of the page's deliveries.
func (p *DeliveryPage) Refs() []DeliveryRef {
	refs := make([]DeliveryRef, len(p.Views))
	for i := range p.Views {
		refs[i] = p.Views[i].Ref()
	}
	return refs
}

// attemptLogSize is the SQL for the bytes of a delivery's (d) attempt log.
var attemptLogSize = "(SELECT COALESCE(SUM(" + dataSize("a.response_body") + " + " + dataSize("a.request_headers") + " + " +
	dataSize("a.error") + "), 0) FROM delivery_attempts AS a WHERE a.delivery_id = d.id)"

// The joins a read of deliveries (d) may need: their events (e), their webhooks (w).
const (
	joinEvents = 1 << iota
	joinWebhooks
)

// from selects the deliveries (d) q selects, in no order and without a limit, with their events
// (e) and webhooks (w) joined as join asks; the scope joins the webhooks in any case. A count or a
// plan needs neither: they read the deliveries alone.
func (q DeliveryQuery) from(db bun.IDB, join int) *bun.SelectQuery {
	s := db.NewSelect().TableExpr("deliveries AS d")
	if join&joinEvents != 0 || len(q.EventTypes) > 0 {
		s = s.Join("JOIN events AS e ON e.id = d.event_id")
	}
	if join&joinWebhooks != 0 || q.Scope != nil {
		s = s.Join("JOIN webhooks AS w ON w.id = d.webhook_id")
	}
	if sc := q.Scope; sc != nil {
		s = s.Where("w.account_id = ?", sc.AccountID).Where("w.variant = ?", sc.Variant).
			Where("w." + sc.kindClause()).Where("w.deleted_at IS NULL")
	}
	for _, f := range []struct {
		id  int64
		sql string
	}{{q.WebhookID, "d.webhook_id = ?"}, {q.EventID, "d.event_id = ?"}, {q.DeliveryID, "d.id = ?"},
		{q.After, "d.id > ?"}, {q.Before, "d.id < ?"}, {q.UpTo, "d.id <= ?"}} {
		if f.id > 0 {
			s = s.Where(f.sql, f.id)
		}
	}
	if len(q.States) > 0 {
		s = s.Where("d.state IN (?)", bun.List(q.States))
	}
	if len(q.DeliveryIDs) > 0 {
		s = s.Where("d.id IN (?)", bun.List(q.DeliveryIDs))
	}
	if len(q.WebhookIDs) > 0 {
		s = s.Where("d.webhook_id IN (?)", bun.List(q.WebhookIDs))
	}
	if len(q.EventTypes) > 0 {
		s = s.Where("e.event_type IN (?)", bun.List(q.EventTypes))
	}
	if len(q.StatusClasses) > 0 {
		s = s.Where(statusClassSQL(q.StatusClasses))
	}
	if !q.Since.IsZero() {
		s = s.Where("d.created_at >= ?", q.Since)
	}
	if !q.Until.IsZero() {
		s = s.Where("d.created_at < ?", q.Until)
	}
	if q.Undispatched {
		s = s.Where("d.dispatched_at IS NULL")
	}
	if !q.ClaimedBefore.IsZero() {
		s = s.Where("d.claimed_at < ?", q.ClaimedBefore)
	}
	return s
}

// statusClassSQL is the condition that a delivery (d) is in one of classes, judged on its last
// attempt (la): the row of delivery_attempts whose attempt is d.attempts, one by the unique index
// (delivery_id, attempt). A name that is not a class selects nothing.
func statusClassSQL(classes []string) string {
	quoted := func(names []string) string {
		q := make([]string, len(names))
		for i, n := range names {
			q[i] = "'" + n + "'"
		}
		return strings.Join(q, ", ")
	}
	noStatus := "la.status_code IS NULL AND "
	known := append([]string{StatusTimeout, StatusTLS}, NetworkErrorClasses...)
	conds := map[string]string{
		Status2xx:     "la.status_code BETWEEN 200 AND 299",
		Status3xx:     "la.status_code BETWEEN 300 AND 399",
		Status4xx:     "la.status_code BETWEEN 400 AND 499",
		Status5xx:     "la.status_code BETWEEN 500 AND 599",
		StatusTimeout: noStatus + "la.error_class = '" + StatusTimeout + "'",
		StatusTLS:     noStatus + "la.error_class = '" + StatusTLS + "'",
		StatusNetwork: noStatus + "la.error_class IN (" + quoted(NetworkErrorClasses) + ")",
		StatusOther: "(la.status_code IS NOT NULL AND (la.status_code < 200 OR la.status_code > 599)) OR (" + noStatus +
			"(la.error_class IS NULL OR la.error_class NOT IN (" + quoted(known) + ")))",
	}
	var attempted []string
	none := false
	for _, c := range classes {
		if c == StatusNone {
			none = true
		} else if cond, ok := conds[c]; ok {
			attempted = append(attempted, "("+cond+")")
		}
	}
	var or []string
	if none {
		or = append(or, "d.attempts = 0")
	}
	if len(attempted) > 0 {
		or = append(or, "EXISTS (SELECT 1 FROM delivery_attempts AS la WHERE la.delivery_id = d.id AND la.attempt = d.attempts AND ("+
			strings.Join(attempted, " OR ")+"))")
	}
	if len(or) == 0 {
		return "1 = 0"
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// ordered orders s (which selects d, e and w) as q asks; the account turns need a column of
// their own, so they order the plan only.
func (q DeliveryQuery) ordered(s *bun.SelectQuery) *bun.SelectQuery {
	switch q.Order {
	case NewestFirst:
		return s.OrderExpr("d.id DESC")
	case ClaimOrder:
		return s.OrderExpr("d.claimed_at ASC, d.id ASC")
	default:
		return s.OrderExpr("d.id ASC")
	}
}

// viewColumns are the columns of a DeliveryView, the event's data with IncludeEvent.
func (q DeliveryQuery) viewColumns(s *bun.SelectQuery) *bun.SelectQuery {
	s = s.ColumnExpr("d.*, e.account_id, e.variant, e.event_type, w.url AS webhook_url, " +
		"CASE WHEN w.event_type = e.event_type THEN w.version ELSE 0 END AS webhook_version")
	if q.Include&IncludeEvent != 0 {
		s = s.ColumnExpr("e.data AS event_data, e.occurred_at AS event_occurred_at, e.version AS event_version")
	}
	return s
}

// ReadDeliveries returns the deliveries q selects, in its order, one past its limit read to know
// whether more are left. A page bounded by bytes, or read in account turns, is planned from the
// deliveries' ids (and the sizes of their attempt logs) first, and only the planned ones are read.
func ReadDeliveries(ctx context.Context, db bun.IDB, q DeliveryQuery) (*DeliveryPage, error) {
	page := &DeliveryPage{Views: []DeliveryView{}}
	if q.MaxBytes > 0 || q.Order == AccountTurns {
		ids, more, err := q.plan(ctx, db)
		if err != nil {
			return nil, err
		}
		page.More = more
		if len(ids) == 0 {
			return page, nil
		}
		if err := q.viewColumns(q.from(db, joinEvents|joinWebhooks)).Where("d.id IN (?)", bun.List(ids)).Scan(ctx, &page.Views); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		at := make(map[int64]int, len(ids))
		for i, id := range ids {
			at[id] = i
		}
		slices.SortFunc(page.Views, func(a, b DeliveryView) int { return at[a.ID] - at[b.ID] })
		page.Last = ids[len(ids)-1]
	} else {
		s := q.ordered(q.viewColumns(q.from(db, joinEvents|joinWebhooks)))
		if q.Limit > 0 {
			s = s.Limit(q.Limit + 1)
		}
		if err := s.Scan(ctx, &page.Views); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		if q.Limit > 0 && int64(len(page.Views)) > q.Limit {
			page.Views, page.More = page.Views[:q.Limit], true
		}
		if n := len(page.Views); n > 0 {
			page.Last = page.Views[n-1].ID
		}
	}
	if q.Include&IncludeAttempts != 0 {
		return page, attachAttempts(ctx, db, page.Views)
	}
	return page, nil
}

// plan reads the ids of the page q asks for, with the sizes of their attempt logs when it is
// bounded by bytes, and fits the page.
func (q DeliveryQuery) plan(ctx context.Context, db bun.IDB) ([]int64, bool, error) {
	var rows []sizedRow
	join := 0
	if q.Order == AccountTurns {
		join = joinEvents // the turns are the events' accounts'
	}
	s := q.from(db, join).ColumnExpr("d.id")
	if q.MaxBytes > 0 {
		s = s.ColumnExpr(attemptLogSize + " AS size")
	} else {
		s = s.ColumnExpr("0 AS size")
	}
	if q.Order == AccountTurns {
		turns := s.ColumnExpr("ROW_NUMBER() OVER (PARTITION BY e.account_id ORDER BY d.id) AS turn")
		s = db.NewSelect().TableExpr("(?) AS u", turns).ColumnExpr("id, size").OrderExpr("turn ASC, id ASC")
	} else {
		s = q.ordered(s)
	}
	if q.Limit > 0 {
		s = s.Limit(q.Limit + 1)
	}
	if err := s.Scan(ctx, &rows); err != nil {
		return nil, false, fmt.Errorf("read deliveries: %w", err)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = int64(len(rows))
	}
	ids, more := fitPage(rows, limit, q.MaxBytes, 0)
	return ids, more, nil
}

// CountDeliveries counts the deliveries q selects (its cursor and states included, its limit and
// order not) and returns the largest of their ids, 0 when there are none.
func CountDeliveries(ctx context.Context, db bun.IDB, q DeliveryQuery) (count int, maxID int64, err error) {
	var row struct {
		N   int   `bun:"n"`
		Max int64 `bun:"max_id"`
	}
	if err := q.from(db, 0).ColumnExpr("COUNT(*) AS n, COALESCE(MAX(d.id), 0) AS max_id").Scan(ctx, &row); err != nil {
		return 0, 0, fmt.Errorf("count deliveries: %w", err)
	}
	return row.N, row.Max, nil
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
