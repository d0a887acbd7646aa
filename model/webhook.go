package model

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Webhook binds one receiver URL to one event type for one account and variant.
type Webhook struct {
	bun.BaseModel `bun:"table:webhooks"`

	ID        int64   `bun:"id,pk,autoincrement"`
	AccountID int64   `bun:"account_id,notnull"`
	Variant   Variant `bun:"variant,notnull"`
	URL       string  `bun:"url,notnull"`
	EventType string  `bun:"event_type,notnull"`
	// Version is the version of EventType's data the webhook receives (docs/events.md,
	// "Versions"): every event of its type is converted down to it. CreateWebhook stores the
	// newest for a zero.
	Version int    `bun:"version,notnull"`
	Status  string `bun:"status,notnull"`
	// Secret holds secretbox.Box ciphertext, never the plain secret.
	Secret string `bun:"secret,notnull"`
	// PreviousSecrets are the rotated-out secrets, newest first, loaded by LoadDeliveryTarget
	// only; expired ones may still be among them until the next rotation prunes them.
	PreviousSecrets []PreviousSecret `bun:"-"`
	CreatedAt       time.Time        `bun:"created_at,notnull"`
	UpdatedAt       time.Time        `bun:"updated_at,notnull"`
	LastTriggeredAt *time.Time       `bun:"last_triggered_at"`
	LastStatus      *string          `bun:"last_status"`
	// FailureCount is the number of failed deliveries (schedules exhausted) since the last
	// successful attempt, not the number of failed attempts.
	FailureCount int `bun:"failure_count,notnull"`
	// DisabledAt is set while the webhook is disabled (see Disabled); DisabledReason is
	// DisabledAuto or DisabledManual then.
	DisabledAt     *time.Time `bun:"disabled_at"`
	DisabledReason *string    `bun:"disabled_reason"`
	// FailingSince is the start of the oldest failed attempt since the last success, and
	// ExhaustedCount the deliveries exhausted since then; a success clears both.
	FailingSince   *time.Time `bun:"failing_since"`
	ExhaustedCount int        `bun:"exhausted_count,notnull"`
	// RateLimit caps deliveries per second to this webhook's URL, MaxInFlight its attempts in flight
	// at once, in each worker process; nil leaves the worker's defaults (docs/operations.md).
	RateLimit   *int `bun:"rate_limit"`
	MaxInFlight *int `bun:"max_in_flight"`
	// Filter is the webhook's payload filter as stored (canonical JSON, docs/filters.md), nil for
	// none: an event its filter refuses gets no delivery to it.
	Filter *string `bun:"filter"`
	// OrderingKey is the dotted path into the delivered body whose value names an event's lane
	// (docs/ordering.md), nil when the webhook is not ordered.
	OrderingKey *string `bun:"ordering_key"`
	// Headers holds secretbox.Box ciphertext of the webhook's custom headers (a JSON object of names
	// and values, secretbox.Box.WebhookHeaders), nil for none; never the plain values.
	Headers *string `bun:"headers"`
	// Auth holds secretbox.Box ciphertext of the webhook's authentication to its receiver (a JSON
	// ReceiverAuth, secretbox.Box.WebhookAuth), nil for none; never the plain password or secret.
	Auth *string `bun:"auth"`
	// TLS holds secretbox.Box ciphertext of the webhook's TLS settings toward its receiver (a JSON
	// ReceiverTLS, secretbox.Box.WebhookTLS), nil for none; never the plain private key.
	TLS *string `bun:"tls"`
	// TLSExpiresAt is the earliest notAfter of the certificates in TLS, nil without TLS.
	TLSExpiresAt *time.Time `bun:"tls_expires_at"`
	// Destination is the JSON of the webhook's destination beyond HTTP (destination.Settings:
	// docs/destinations.md), nil for an HTTPS endpoint; DestinationCredentials is secretbox.Box
	// ciphertext of its secrets (destination.Credentials), nil for none.
	Destination            *string `bun:"destination"`
	DestinationCredentials *string `bun:"destination_credentials"`
	// Kind is KindWebhook for a subscription to one event type, or the kind of a notification
	// endpoint (KindNoticeWebhook, KindNoticeChat, KindNoticeEmail: docs/notifications.md), which
	// receives the notices of NoticeTypes (nil: DefaultNoticeTypes) instead of events.
	Kind        string  `bun:"kind,notnull"`
	NoticeTypes *string `bun:"notice_types"`
	// The state of the webhook's notices: AlertedAt while webhook.failing has been sent and no
	// webhook.recovered yet, WarnedAt once webhook.disabling went in the current failure,
	// QuietUntil the end of the storm rule's quiet period, SuppressedNotices the failing
	// transitions it kept quiet, which the next notice summarises.
	AlertedAt         *time.Time `bun:"alerted_at"`
	WarnedAt          *time.Time `bun:"warned_at"`
	QuietUntil        *time.Time `bun:"quiet_until"`
	SuppressedNotices int        `bun:"suppressed_notices,notnull"`
	DeletedAt         *time.Time `bun:"deleted_at,soft_delete,nullzero"`
}

// WebhookScope names the webhooks one caller may see: those of one account in one variant. With
// Channels, it names the account's notification endpoints instead: the two never mix in a list,
// a count or a lookup by id.
type WebhookScope struct {
	AccountID int64
	Variant   Variant
	Channels  bool
}

// apply selects the rows of the scope's account and variant, of any table that has both.
func (s WebhookScope) apply(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Where("account_id = ?", s.AccountID).Where("variant = ?", s.Variant)
}

// hooks selects the scope's webhooks (or notification endpoints).
func (s WebhookScope) hooks(q *bun.SelectQuery) *bun.SelectQuery {
	return s.apply(q).Where(s.kindClause())
}

// changes narrows an update of webhooks to the scope's.
func (s WebhookScope) changes(q *bun.UpdateQuery) *bun.UpdateQuery {
	return q.Where("account_id = ?", s.AccountID).Where("variant = ?", s.Variant).Where(s.kindClause())
}

func (s WebhookScope) kindClause() string {
	if s.Channels {
		return "kind <> '" + KindWebhook + "'"
	}
	return "kind = '" + KindWebhook + "'"
}

// WebhookFilter selects a page of webhooks, ordered by id.
type WebhookFilter struct {
	EventType string
	Status    string
	After     int64
	Limit     int64
}

// CreateWebhook inserts w, refusing with ErrLimitReached when its account already holds max webhooks
// of that variant. The limit check and the insert run in one transaction holding the account row. A
// webhook with no Version gets version 1: the caller that knows the versions of event types
// (webhooks.Service.Create) sets the one it receives.
func CreateWebhook(ctx context.Context, db bun.IDB, w *Webhook, max int64) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockAccountForCount(ctx, tx, w.AccountID); err != nil {
			return err
		}
		if w.Kind == "" {
			w.Kind = KindWebhook
		}
		if w.Version == 0 {
			w.Version = 1
		}
		scope := WebhookScope{AccountID: w.AccountID, Variant: w.Variant, Channels: w.Kind != KindWebhook}
		n, err := scope.hooks(tx.NewSelect().Model((*Webhook)(nil))).Count(ctx)
		if err != nil {
			return fmt.Errorf("count webhooks: %w", err)
		}
		if n >= max {
			return ErrLimitReached
		}
		if _, err := tx.NewInsert().Model(w).Returning("id").Exec(ctx); err != nil {
			return fmt.Errorf("insert webhook: %w", err)
		}
		return nil
	})
}

// GetWebhook loads one live webhook within scope, or ErrNotFound.
func GetWebhook(ctx context.Context, db bun.IDB, scope WebhookScope, id int64) (*Webhook, error) {
	w := &Webhook{}
	return ScanOne(ctx, w, scope.hooks(db.NewSelect().Model(w)).Where("id = ?", id), "webhook")
}

// FindWebhook loads one live webhook by id, whatever its account: an operator's lookup, never a
// client's (they go through GetWebhook and its scope). ErrNotFound when there is none.
func FindWebhook(ctx context.Context, db bun.IDB, id int64) (*Webhook, error) {
	w := &Webhook{}
	return ScanOne(ctx, w, db.NewSelect().Model(w).Where("id = ?", id), "webhook")
}

// WebhookRateLimit reads the rateLimit of the webhook with that id (0: none, or the webhook is
// gone), for the worker's attempts waiting for a turn under the old one.
func WebhookRateLimit(ctx context.Context, db bun.IDB, id int64) (int, error) {
	var limit *int
	err := db.NewSelect().Model((*Webhook)(nil)).Column("rate_limit").Where("id = ?", id).Scan(ctx, &limit)
	if errors.Is(err, sql.ErrNoRows) || limit == nil {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read rate limit of webhook %d: %w", id, err)
	}
	return *limit, nil
}

// ListWebhooks returns one page of live webhooks within scope.
func ListWebhooks(ctx context.Context, db bun.IDB, scope WebhookScope, f WebhookFilter) ([]Webhook, error) {
	hooks := []Webhook{}
	q := scope.hooks(db.NewSelect().Model(&hooks)).Where("id > ?", f.After).OrderExpr("id ASC").Limit(f.Limit)
	if f.EventType != "" {
		q = q.Where("event_type = ?", f.EventType)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return hooks, nil
}

// LimitChange changes one per-endpoint limit of a webhook: Set false keeps the stored value, Set
// with a nil To clears it, so the worker's default applies again.
type LimitChange struct {
	Set bool
	To  *int
}

// FilterChange changes a webhook's payload filter: Set false keeps it, Set with a nil To removes
// it. To is the filter's canonical JSON.
type FilterChange struct {
	Set bool
	To  *string
}

// OrderingChange changes a webhook's ordering key (docs/ordering.md): Set false keeps it, Set with a
// nil To removes it, so the webhook is no longer ordered. To is the key's dotted path.
type OrderingChange struct {
	Set bool
	To  *string
}

// HeadersChange changes a webhook's custom headers: Set false keeps them, Set with a nil To removes
// them. To is their secretbox.Box ciphertext, never the plain object.
type HeadersChange struct {
	Set bool
	To  *string
}

// AuthChange changes a webhook's authentication to its receiver: Set false keeps it, Set with a
// nil To removes it. To is its secretbox.Box ciphertext, never the plain object.
type AuthChange struct {
	Set bool
	To  *string
}

// TLSChange changes a webhook's TLS settings toward its receiver: Set false keeps them, Set with a
// nil To removes them. To is their secretbox.Box ciphertext, never the plain object; ExpiresAt is the
// earliest notAfter of their certificates.
type TLSChange struct {
	Set       bool
	To        *string
	ExpiresAt *time.Time
}

// DestinationChange changes a webhook's destination (docs/destinations.md): Set false keeps it, Set
// with a nil To makes the webhook an HTTPS endpoint again. To is the settings' JSON, Credentials
// their secretbox.Box ciphertext (nil for none).
type DestinationChange struct {
	Set         bool
	To          *string
	Credentials *string
}

// SettingsChange changes a webhook's own settings, beside its URL: its per-endpoint limits
// (RateLimit, MaxInFlight), its payload filter, its ordering key and its custom headers. Its zero value changes
// nothing.
type SettingsChange struct {
	RateLimit   LimitChange
	MaxInFlight LimitChange
	Filter      FilterChange
	Ordering    OrderingChange
	Headers     HeadersChange
	Auth        AuthChange
	TLS         TLSChange
	Destination DestinationChange
	// Version, when Set, is the version of its event type the webhook receives from now on.
	Version LimitChange
}

// Empty reports whether c leaves every setting as it is.
func (c SettingsChange) Empty() bool {
	return !c.RateLimit.Set && !c.MaxInFlight.Set && !c.Filter.Set && !c.Ordering.Set && !c.Headers.Set && !c.Auth.Set && !c.TLS.Set && !c.Destination.Set && !c.Version.Set
}

// Limits reports whether c changes a limit.
func (c SettingsChange) Limits() bool { return c.RateLimit.Set || c.MaxInFlight.Set }

// set adds c's columns to q. Each column is set on its own, so concurrent changes of two settings
// both land: neither writes back a value it read.
func (c SettingsChange) set(q *bun.UpdateQuery) *bun.UpdateQuery {
	if c.RateLimit.Set {
		q = q.Set("rate_limit = ?", c.RateLimit.To)
	}
	if c.MaxInFlight.Set {
		q = q.Set("max_in_flight = ?", c.MaxInFlight.To)
	}
	if c.Filter.Set {
		q = q.Set("filter = ?", c.Filter.To)
	}
	if c.Ordering.Set {
		q = q.Set("ordering_key = ?", c.Ordering.To)
	}
	if c.Headers.Set {
		q = q.Set("headers = ?", c.Headers.To)
	}
	if c.Auth.Set {
		q = q.Set("auth = ?", c.Auth.To)
	}
	if c.TLS.Set {
		q = q.Set("tls = ?", c.TLS.To).Set("tls_expires_at = ?", c.TLS.ExpiresAt)
	}
	if c.Destination.Set {
		q = q.Set("destination = ?", c.Destination.To).Set("destination_credentials = ?", c.Destination.Credentials)
	}
	if c.Version.Set && c.Version.To != nil {
		q = q.Set("version = ?", *c.Version.To)
	}
	return q
}

// UpdateWebhookURL sets a new receiver URL and resets the status to the variant's initial one. A
// new URL is a new receiver, so a disabled webhook is enabled and its failure record starts afresh.
// limits changes the per-endpoint limits in the same statement (PUT carries them beside the URL).
// now stamps the change (updated_at, status_at).
func UpdateWebhookURL(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, url string, limits SettingsChange, now time.Time) (*Webhook, error) {
	var w *Webhook
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// status_at moves too, so an attempt that started before the update cannot overwrite the
		// reset status when it finishes; alerted_at clears, so the new URL is alerted on afresh.
		q := tx.NewUpdate().Model((*Webhook)(nil)).
			Set("url = ?", url).
			Set("status = ?", scope.Variant.InitialStatus()).
			Set("status_at = ?", now).
			Set("alerted_at = NULL").
			Set("disabled_at = NULL, disabled_reason = NULL, failing_since = NULL, exhausted_count = 0").
			Set("updated_at = ?", now)
		res, err := scope.changes(limits.set(q)).Where("id = ?", id).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update webhook: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("update webhook: %w", err)
		} else if n == 0 {
			return ErrNotFound
		}
		w, err = GetWebhook(ctx, tx, scope, id)
		return err
	})
	return w, err
}

// UpdateWebhookLimits changes only the settings of a webhook within scope (its limits, its filter)
// and returns it, or ErrNotFound. URL, status, failure record and disabled state stay as they are:
// a limit says how fast to deliver to the same receiver, a filter which events, it is not a new one. updated_at moves to now when c sets anything;
// an empty c reads the webhook back unchanged.
func UpdateWebhookLimits(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, c SettingsChange, now time.Time) (*Webhook, error) {
	if c.Empty() {
		return GetWebhook(ctx, db, scope, id)
	}
	w, _, err := changeWebhook(ctx, db, scope, id, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return c.set(q).Set("updated_at = ?", now)
	}, nil, Notice{})
	return w, err
}

// DeleteWebhook soft-deletes a webhook within scope. Its deliveries keep their history; running
// delivery workflows see it gone and stop.
func DeleteWebhook(ctx context.Context, db bun.IDB, scope WebhookScope, id int64) error {
	res, err := db.NewDelete().Model((*Webhook)(nil)).
		Where("id = ?", id).Where("account_id = ?", scope.AccountID).Where("variant = ?", scope.Variant).Where(scope.kindClause()).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// MaxPreviousSecrets bounds the rotated-out secrets that sign beside the current one: a rotation
// while this many are still inside their overlap is refused (RotationLimitError), so no secret ever
// stops signing before the expiry its rotation promised.
const MaxPreviousSecrets = 5

// SecretOverlap is how long a rotated-out secret keeps signing beside the new one: the API's and
// the portal's rotations pass Now()+SecretOverlap to RotateWebhookSecret.
const SecretOverlap = 24 * time.Hour

// PreviousSecret is a rotated-out secret of a webhook that keeps signing until ExpiresAt.
type PreviousSecret struct {
	bun.BaseModel `bun:"table:webhook_previous_secrets"`

	ID        int64 `bun:"id,pk,autoincrement"`
	WebhookID int64 `bun:"webhook_id,notnull"`
	// Secret holds secretbox.Box ciphertext, never the plain secret.
	Secret    string    `bun:"secret,notnull"`
	ExpiresAt time.Time `bun:"expires_at,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// RotationLimitError refuses a rotation while MaxPreviousSecrets previous secrets still sign.
type RotationLimitError struct {
	// RetryAt is when the oldest of them expires, and a rotation is possible again.
	RetryAt time.Time
}

func (e *RotationLimitError) Error() string {
	return fmt.Sprintf("%d previous secrets still sign; the oldest expires at %s", MaxPreviousSecrets, e.RetryAt.UTC().Format(time.RFC3339))
}

// RotateWebhookSecret makes sealedNew the signing secret and keeps the current one signing beside it
// until overlapUntil, so receivers can switch without dropping deliveries. Secrets rotated out
// earlier keep their own expiry. Expired previous secrets are deleted here.
func RotateWebhookSecret(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, sealedNew string, overlapUntil time.Time) error {
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		w := &Webhook{}
		q := scope.hooks(tx.NewSelect().Model(w)).Column("id", "secret").Where("id = ?", id)
		if IsPostgres(tx) {
			// Concurrent rotations must each move a different secret out and count each other;
			// SQLite transactions here already hold the database write lock.
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return fmt.Errorf("rotate webhook secret: load webhook: %w", err)
		}
		now := Now()
		if _, err := tx.NewDelete().Model((*PreviousSecret)(nil)).
			Where("webhook_id = ?", id).Where("expires_at <= ?", now).Exec(ctx); err != nil {
			return fmt.Errorf("rotate webhook secret: prune expired: %w", err)
		}
		var live []PreviousSecret
		if err := tx.NewSelect().Model(&live).Column("expires_at").
			Where("webhook_id = ?", id).OrderExpr("expires_at ASC").Scan(ctx); err != nil {
			return fmt.Errorf("rotate webhook secret: count previous: %w", err)
		}
		if len(live) >= MaxPreviousSecrets {
			return &RotationLimitError{RetryAt: live[0].ExpiresAt}
		}
		prev := &PreviousSecret{WebhookID: id, Secret: w.Secret, ExpiresAt: overlapUntil, CreatedAt: now}
		if _, err := tx.NewInsert().Model(prev).Exec(ctx); err != nil {
			return fmt.Errorf("rotate webhook secret: keep previous: %w", err)
		}
		if _, err := tx.NewUpdate().Model((*Webhook)(nil)).
			Set("secret = ?", sealedNew).
			Set("updated_at = ?", now).
			Where("id = ?", id).
			Exec(ctx); err != nil {
			return fmt.Errorf("rotate webhook secret: %w", err)
		}
		return nil
	})
}

// ListPreviousSecrets returns a webhook's rotated-out secrets, newest expiry first, expired ones
// included until the next rotation prunes them.
func ListPreviousSecrets(ctx context.Context, db bun.IDB, webhookID int64) ([]PreviousSecret, error) {
	secrets := []PreviousSecret{}
	if err := db.NewSelect().Model(&secrets).Where("webhook_id = ?", webhookID).
		OrderExpr("expires_at DESC, id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list previous secrets: %w", err)
	}
	return secrets, nil
}

// StatusCount is the number of live webhooks of one variant in one status.
type StatusCount struct {
	Variant Variant `bun:"variant"`
	Status  string  `bun:"status"`
	Count   int64   `bun:"count"`
}

// CountWebhooksWithCertificatesExpiring counts live webhooks (notification endpoints left out)
// whose TLS settings hold a certificate that expires before until, for the expiring-certificates
// gauge.
func CountWebhooksWithCertificatesExpiring(ctx context.Context, db bun.IDB, until time.Time) (int64, error) {
	n, err := db.NewSelect().Model((*Webhook)(nil)).
		Where("kind = ?", KindWebhook).Where("tls IS NOT NULL").Where("tls_expires_at < ?", until).Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("count webhooks with expiring certificates: %w", err)
	}
	return n, nil
}

// CountWebhooksByStatus counts live webhooks (notification endpoints left out) per variant and
// status, for the webhooks gauge. A
// disabled webhook counts as StatusDisabled in both variants, whatever variant A's status says.
func CountWebhooksByStatus(ctx context.Context, db bun.IDB) ([]StatusCount, error) {
	var counts []StatusCount
	err := db.NewSelect().Model((*Webhook)(nil)).
		ColumnExpr("variant, CASE WHEN disabled_at IS NULL THEN status ELSE ? END AS status, COUNT(*) AS count", StatusDisabled).
		Where("kind = ?", KindWebhook).GroupExpr("1, 2").Scan(ctx, &counts)
	if err != nil {
		return nil, fmt.Errorf("count webhooks: %w", err)
	}
	return counts, nil
}

// DestinationVersion names what a delivery into w's destination is made with: its URL, its
// destination's settings and their sealed credentials. It changes when any of them does, and only
// then: a status, a failure count or a limit moves updated_at, and says nothing of the connection.
func (w *Webhook) DestinationVersion() string {
	h := sha256.New()
	for _, part := range []*string{&w.URL, w.Destination, w.DestinationCredentials} {
		if part != nil {
			h.Write([]byte(*part))
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WebhookVersions returns the DestinationVersion of each live webhook among ids: one that was
// deleted is not in the map.
func WebhookVersions(ctx context.Context, db bun.IDB, ids []int64) (map[int64]string, error) {
	var rows []Webhook
	if err := db.NewSelect().Model(&rows).Column("id", "url", "destination", "destination_credentials").Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("webhook versions: %w", err)
	}
	out := make(map[int64]string, len(rows))
	for i := range rows {
		out[rows[i].ID] = rows[i].DestinationVersion()
	}
	return out, nil
}
