package model

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/wire"
)

// The notice types: what happened to a webhook's health (docs/notifications.md).
const (
	// NoticeFailing: the webhook moved to its variant's failing status (A failed, B failing).
	NoticeFailing = "webhook.failing"
	// NoticeRecovered: the first successful delivery after a webhook.failing.
	NoticeRecovered = "webhook.recovered"
	// NoticeDisabling: the webhook will be disabled by the auto-disable rule soon, unless it
	// recovers; once per failure.
	NoticeDisabling = "webhook.disabling"
	// NoticeDisabled: the webhook was disabled, by the rule or by a person (DisabledBy says).
	NoticeDisabled = "webhook.disabled"
	// NoticeEnabled: a disabled webhook was enabled again.
	NoticeEnabled = "webhook.enabled"
	// NoticeExhausted: one delivery ran out of retries. A channel receives it only when it asks.
	NoticeExhausted = "delivery.exhausted"
	// NoticeTest: a sample notice the owner asked for, to one channel (notices.TestNotice); no channel
	// subscribes to it, so it is not among NoticeTypes.
	NoticeTest = "notice.test"
)

// NoticeTypes are every notice type, and DefaultNoticeTypes those a channel receives when it names
// none: all but delivery.exhausted, which can be many.
var (
	NoticeTypes        = []string{NoticeFailing, NoticeRecovered, NoticeDisabling, NoticeDisabled, NoticeEnabled, NoticeExhausted}
	DefaultNoticeTypes = []string{NoticeFailing, NoticeRecovered, NoticeDisabling, NoticeDisabled, NoticeEnabled}
)

// The kinds of webhooks rows: a webhook proper, and the three kinds of notification endpoint.
const (
	KindWebhook       = "webhook"
	KindNoticeWebhook = "notice-webhook"
	KindNoticeChat    = "notice-chat"
	KindNoticeEmail   = "notice-email"
)

// Who made a change that a notice tells (NoticeData.By): the auto-disable rule, or a person through
// the API or the portal.
const (
	ActorRule   = "rule"
	ActorAPI    = "api"
	ActorPortal = "portal"
)

// NoticePolicy decides what the transitions of a webhook's health tell, and when: it is
// notices.Rules (docs/notifications.md), passed in by the caller. Model's transactions consult it,
// so that each decision commits with the rows it judges.
type NoticePolicy interface {
	// QuietPeriod is the length of the storm rule's and the account rule's quiet periods; zero:
	// there are none.
	QuietPeriod() time.Duration
	// DisableLimits is the auto-disable rule: a webhook failing for after, with minExhausted
	// deliveries exhausted, is disabled (after zero: never), and warned warnLead before (negative:
	// never).
	DisableLimits() (after time.Duration, minExhausted int, warnLead time.Duration)
	// NoticeData is notice n's data, recorded at.
	NoticeData(n Notice, at time.Time) NoticeData
	// SummaryData is the data of summary s of the account's notices in variant v, recorded at.
	SummaryData(accountID int64, v Variant, s *NoticeSummary, at time.Time) NoticeData
}

// NoticeError is the last failure a notice reports.
type NoticeError struct {
	Class      string `json:"class" data:"text"`
	StatusCode *int   `json:"statusCode" data:"count"`
	Message    string `json:"message" data:"string"`
	// EventType is the type of the event whose delivery failed: the webhook's, or webhook.test.
	EventType string `json:"eventType,omitempty" data:"text"`
}

// NoticeData is a notice's data, as channels receive it. Its data tags are the rules of the
// notices' schemas in docs/webhooks.yaml (package sources reads them as it reads event data's).
type NoticeData struct {
	AccountID    int64        `json:"accountId" data:"id"`
	Variant      Variant      `json:"variant" data:"enum:A,B"`
	WebhookID    int64        `json:"webhookId" data:"id"`
	URL          string       `json:"url" data:"address"`
	EventType    string       `json:"eventType" data:"string"`
	Status       string       `json:"status" data:"enum:pending,processing,failed,finished,active,failing,disabled"`
	At           time.Time    `json:"at" data:"time"`
	LastError    *NoticeError `json:"lastError"`
	FailureCount int          `json:"failureCount" data:"count"`
	// FailingSince is the start of the oldest failed attempt since the last success.
	FailingSince *time.Time `json:"failingSince" data:"time"`
	// Channel is set when the webhook is a notification endpoint: its kind.
	Channel    string     `json:"channel,omitempty" data:"enum:notice-webhook,notice-chat,notice-email"`
	PortalURL  string     `json:"portalUrl,omitempty" data:"url"`
	By         string     `json:"by,omitempty" data:"enum:rule,api,portal"`
	DisableAt  *time.Time `json:"disableAt,omitempty" data:"time"`
	DeliveryID int64      `json:"deliveryId,omitempty" data:"id"`
	EventID    int64      `json:"eventId,omitempty" data:"id"`
	// Suppressed counts the failing transitions the storm rule kept quiet before this notice;
	// left out when none, so at least 1 when present.
	Suppressed int `json:"suppressed,omitempty" data:"id"`
	// Message is a sentence for a person; a notice.test carries one, the other notices none.
	Message string `json:"message,omitempty" data:"text"`
	// Summary is set on a summary of the account rule: the notices it gathers. The fields above
	// then describe the first webhook it names. Summaries go to the e-mail and chats alone, never
	// to an operational webhook, so docs/webhooks.yaml leaves it out (data:"-").
	Summary *NoticeSummary `json:"summary,omitempty" data:"-"`
}

// Notice is one notice to record, by the transition that makes it.
type Notice struct {
	Type string
	// Webhook is the webhook as the transition left it.
	Webhook    *Webhook
	LastError  *NoticeError
	By         string
	DisableAt  *time.Time
	DeliveryID int64
	EventID    int64
	Suppressed int
}

// IsChannel reports whether the webhook is a notification endpoint.
func (w *Webhook) IsChannel() bool { return w.Kind != "" && w.Kind != KindWebhook }

// Wants reports whether the notification endpoint w receives notices of type t.
func (w *Webhook) Wants(t string) bool {
	if w.NoticeTypes == nil {
		return slices.Contains(DefaultNoticeTypes, t)
	}
	return slices.Contains(strings.Split(*w.NoticeTypes, ","), t)
}

// RecordNotice stores n in db, which is the transition's transaction, as an event (a notice) to
// the account's notification endpoints of the webhook's variant that want its type: the e-mail
// (created on first use, on unless the owner deleted it), operational webhooks and chat. A notice
// about a notification endpoint goes to the e-mail alone, and one about the e-mail nowhere: no
// channel reports on itself. Within the account's quiet period the e-mail and chats do not get it
// now: it is held for the period's summary (holdFromPeople). It returns nil when no endpoint gets
// the notice now; otherwise its deliveries start after the commit like any event's (or the
// sweeper starts them).
func RecordNotice(ctx context.Context, db bun.IDB, rules NoticePolicy, n Notice) (*PublishResult, error) {
	w := n.Webhook
	if w.Kind == KindNoticeEmail {
		return nil, nil
	}
	if err := ensureEmailChannel(ctx, db, w.AccountID, w.Variant); err != nil {
		return nil, err
	}
	var all []Webhook
	err := db.NewSelect().Model(&all).Column("id", "url", "kind", "notice_types").
		Where("account_id = ?", w.AccountID).Where("variant = ?", w.Variant).Where("kind <> ?", KindWebhook).
		Where("disabled_at IS NULL").OrderExpr("id ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("find notification endpoints: %w", err)
	}
	var to []Webhook
	for _, c := range all {
		if c.ID != w.ID && c.Wants(n.Type) && (!w.IsChannel() || c.Kind == KindNoticeEmail) {
			to = append(to, c)
		}
	}
	if len(to) == 0 {
		return nil, nil
	}
	to, held, err := holdFromPeople(ctx, db, rules, n, to)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(rules.NoticeData(n, Now()))
	if err != nil {
		return nil, fmt.Errorf("encode notice: %w", err)
	}
	canonical, err := wire.CanonicalJSON(data)
	if err != nil {
		return nil, fmt.Errorf("encode notice: %w", err)
	}
	// A notice's data has one version: no table of versions is needed.
	pr, err := insertEvent(ctx, db, statementsOf(db), nil, NewEvent{
		AccountID: w.AccountID, Variant: w.Variant, EventType: n.Type, Data: string(canonical), Notice: w.ID, Channels: to,
	})
	if err != nil {
		return nil, err
	}
	if held {
		if err := holdNotice(ctx, db, pr.Event, w); err != nil {
			return nil, err
		}
	}
	if len(pr.Deliveries) == 0 {
		return nil, nil // held from every channel that wants it: its summary will tell it
	}
	return pr, nil
}

// ensureEmailChannel creates the account's e-mail notification endpoint of variant v, addressed to
// its owner, unless there is one, or was: an owner who deleted it turned the e-mail off.
func ensureEmailChannel(ctx context.Context, db bun.IDB, accountID int64, v Variant) error {
	exists, err := db.NewSelect().Model((*Webhook)(nil)).WhereAllWithDeleted().
		Where("account_id = ?", accountID).Where("variant = ?", v).Where("kind = ?", KindNoticeEmail).Exists(ctx)
	if err != nil || exists {
		return err
	}
	account, err := GetAccount(ctx, db, accountID)
	if err != nil {
		return err
	}
	now := Now()
	c := &Webhook{AccountID: accountID, Variant: v, Kind: KindNoticeEmail, URL: "mailto:" + account.OwnerEmail,
		Status: v.InitialStatus(), CreatedAt: now, UpdatedAt: now}
	// Two transitions of the account's webhooks at once may both find none: the unique index
	// (webhooks_email_channel) keeps one, and the other inserts nothing (PostgreSQL waits for the
	// first transaction; SQLite's writers take turns).
	if _, err := db.NewInsert().Model(c).On("CONFLICT (account_id, variant) WHERE kind = 'notice-email' DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("create e-mail notification endpoint: %w", err)
	}
	return nil
}

// EnsureEmailChannel is ensureEmailChannel for a list of an account's notification endpoints,
// which shows the e-mail before its first notice.
func EnsureEmailChannel(ctx context.Context, db bun.IDB, scope WebhookScope) error {
	return ensureEmailChannel(ctx, db, scope.AccountID, scope.Variant)
}

// ListNotices returns the newest notices of an account in a variant, newest first, up to limit.
func ListNotices(ctx context.Context, db bun.IDB, scope WebhookScope, limit int64) ([]Event, error) {
	var out []Event
	err := scope.apply(db.NewSelect().Model(&out)).Where("about_webhook_id IS NOT NULL").
		OrderExpr("id DESC").Limit(limit).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list notices: %w", err)
	}
	return out, nil
}

// EndQuietPeriods ends the storm rule's quiet periods that are over, up to limit of them: a
// webhook that moved into failing during its quiet period, and still fails, gets its
// webhook.failing now, summarising the transitions kept quiet; the others just leave the period.
// It returns the notices recorded, whose deliveries the caller starts (the sweeper, which calls
// it). Each webhook is judged and changed in one transaction, compare-and-set, so replicas and
// exhaustions that race it record one notice.
func EndQuietPeriods(ctx context.Context, db bun.IDB, rules NoticePolicy, limit int64) ([]*PublishResult, error) {
	var ids []int64
	err := db.NewSelect().Model((*Webhook)(nil)).Column("id").Where("quiet_until IS NOT NULL").Where("quiet_until <= ?", Now()).
		OrderExpr("quiet_until").Limit(limit).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("find quiet periods over: %w", err)
	}
	var out []*PublishResult
	for _, id := range ids {
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			before := &Webhook{}
			if err := tx.NewSelect().Model(before).Where("id = ?", id).Scan(ctx); err != nil {
				return fmt.Errorf("load webhook: %w", err)
			}
			now := Now()
			res, err := tx.NewUpdate().Model((*Webhook)(nil)).Set("alerted_at = ?", now).Set("suppressed_notices = 0").Set("quiet_until = NULL").
				Where("id = ?", id).Where("quiet_until <= ?", now).
				Where("alerted_at IS NULL").Where("disabled_at IS NULL").Where("exhausted_count > 0").Exec(ctx)
			if err != nil {
				return fmt.Errorf("end quiet period: %w", err)
			}
			if alert, err := affectedOne(res); err != nil || !alert {
				if err == nil {
					_, err = tx.NewUpdate().Model((*Webhook)(nil)).Set("quiet_until = NULL").Where("id = ?", id).Where("quiet_until <= ?", now).Exec(ctx)
				}
				return err
			}
			w := &Webhook{}
			if err := tx.NewSelect().Model(w).Where("id = ?", id).Scan(ctx); err != nil {
				return fmt.Errorf("load webhook: %w", err)
			}
			pr, err := RecordNotice(ctx, tx, rules, Notice{Type: NoticeFailing, Webhook: w, Suppressed: before.SuppressedNotices})
			if pr != nil {
				out = append(out, pr)
			}
			return err
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// SetNoticeTypes sets the notice types a notification endpoint of scope wants (comma-separated;
// nil: DefaultNoticeTypes) and reads it back, or ErrNotFound. Its URL, status and failure record
// stay: the receiver is the same.
func SetNoticeTypes(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, types *string) (*Webhook, error) {
	scope.Channels = true
	w, _, err := changeWebhook(ctx, db, scope, id, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Set("notice_types = ?", types).Set("updated_at = ?", Now())
	}, nil, Notice{})
	return w, err
}

// DecodeNoticeData decodes a notice's data; data that does not decode (it is ours, so never) gives a
// notice that names its type only.
func DecodeNoticeData(ev *Event) NoticeData {
	var d NoticeData
	_ = json.Unmarshal([]byte(ev.Data), &d)
	return d
}
