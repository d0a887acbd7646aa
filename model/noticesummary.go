package model

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/wire"
)

// The account rule (docs/notifications.md): the e-mail and the chats, read by people, get at most
// one notice of each type per account, variant and quiet period (NoticePolicy.QuietPeriod). The first is
// told at once and begins the period; the others are held, and one summary tells them when it
// ends. Operational webhooks, read by machines, get every notice as it comes. What is held is
// decided in the transaction of the transition, with its notice; what is summarised, in the
// sweeper's transaction that records the summary: both write the period's notice_quiet row first,
// so that they take turns on it.

// SummaryListed is how many webhooks a summary names in its data (the e-mail names each): the
// default limit of webhooks per account and variant, so that by default every webhook a summary
// tells of is named.
const SummaryListed = 100

// NoticeSummary is a summary's account of the notices it gathers: those of its type about the
// account's webhooks that the account rule held from the e-mail and the chats in a quiet period.
type NoticeSummary struct {
	// Since is when the first of them was recorded.
	Since time.Time `json:"since"`
	// Notices is how many notices it gathers, about Webhooks webhooks.
	Notices  int `json:"notices"`
	Webhooks int `json:"webhooks"`
	// Listed are the first SummaryListed of those webhooks, in the order of their first notice.
	Listed []SummaryWebhook `json:"listed"`
}

// SummaryWebhook is one webhook a summary names.
type SummaryWebhook struct {
	WebhookID int64  `json:"webhookId"`
	URL       string `json:"url"`
	EventType string `json:"eventType"`
	// Status is the webhook's status when the summary was recorded: a webhook that failed may have
	// recovered since, one that was disabled may be enabled; "deleted" when it was deleted.
	Status string `json:"status"`
	// Notices is how many of the notices are about it (delivery.exhausted: its deliveries).
	Notices int `json:"notices"`
	// LastError is the last error of its latest notice, when that told one.
	LastError *NoticeError `json:"lastError"`
	PortalURL string       `json:"portalUrl,omitempty"`
}

// noticeQuiet is the account rule's quiet period of one account, variant and notice type.
type noticeQuiet struct {
	bun.BaseModel `bun:"table:notice_quiet"`
	AccountID     int64     `bun:"account_id,pk"`
	Variant       Variant   `bun:"variant,pk"`
	EventType     string    `bun:"event_type,pk"`
	QuietUntil    time.Time `bun:"quiet_until"`
	Held          int       `bun:"held"`
}

// periodKey selects a period's row, or its holds, with the period's account, variant and type.
const periodKey = "account_id = ? AND variant = ? AND event_type = ?"

// noticeHold is a notice held from the people's channels for the summary of its period.
type noticeHold struct {
	bun.BaseModel `bun:"table:notice_holds"`
	EventID       int64   `bun:"event_id,pk"`
	AccountID     int64   `bun:"account_id"`
	Variant       Variant `bun:"variant"`
	EventType     string  `bun:"event_type"`
	WebhookID     int64   `bun:"webhook_id"`
}

// readByPeople reports whether notification endpoint c is read by a person: the e-mail and chats.
func readByPeople(c Webhook) bool { return c.Kind == KindNoticeEmail || c.Kind == KindNoticeChat }

// holdFromPeople judges notice n, about to go to the channels to, by the account rule, in the
// transition's transaction tx. It returns the channels the notice goes to now, and whether it is
// held for the summary of the account's quiet period (the caller records the hold once the notice
// is stored). The rule is off when the quiet period is zero, and notices about a notification endpoint
// (told to the e-mail alone, and few) are never held.
func holdFromPeople(ctx context.Context, tx bun.IDB, rules NoticePolicy, n Notice, to []Webhook) ([]Webhook, bool, error) {
	w := n.Webhook
	quiet := rules.QuietPeriod()
	if quiet <= 0 || w.IsChannel() || !slices.ContainsFunc(to, readByPeople) {
		return to, false, nil
	}
	machines := slices.DeleteFunc(slices.Clone(to), readByPeople)
	if n.Type == NoticeRecovered {
		// People not yet told of the failure (it waits in a summary) are not told it ended: the
		// summary gives the webhook's status as it is then.
		waiting, err := failureHeld(ctx, tx, w)
		if err != nil || waiting {
			return machines, false, err
		}
	}
	p := &noticeQuiet{AccountID: w.AccountID, Variant: w.Variant, EventType: n.Type}
	now := Now()
	// The first notice of a period that is over, and has held nothing, begins a new period and is
	// told. Any other is held: one within the period, or after its end but before the sweeper
	// recorded its summary (it joins that summary, due now).
	open := "notice_quiet.quiet_until > ? OR notice_quiet.held > 0"
	if _, err := tx.NewRaw(`INSERT INTO notice_quiet (account_id, variant, event_type, quiet_until, held) VALUES (?, ?, ?, ?, 0)
		ON CONFLICT (account_id, variant, event_type) DO UPDATE SET
		held = CASE WHEN `+open+` THEN notice_quiet.held + 1 ELSE 0 END,
		quiet_until = CASE WHEN `+open+` THEN notice_quiet.quiet_until ELSE excluded.quiet_until END`,
		p.AccountID, p.Variant, p.EventType, now.Add(quiet), now, now).Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("account quiet period: %w", err)
	}
	if err := tx.NewSelect().Model(p).WherePK().Scan(ctx); err != nil {
		return nil, false, fmt.Errorf("account quiet period: %w", err)
	}
	if p.Held == 0 {
		return to, false, nil
	}
	return machines, true, nil
}

// failureHeld reports whether webhook w's webhook.failing is held for a summary. It first writes
// the period's row (a write that changes nothing), so that the sweeper cannot record that summary
// meanwhile with w's status before this transaction's recovery.
func failureHeld(ctx context.Context, tx bun.IDB, w *Webhook) (bool, error) {
	p := &noticeQuiet{AccountID: w.AccountID, Variant: w.Variant, EventType: NoticeFailing}
	if _, err := tx.NewUpdate().Model((*noticeQuiet)(nil)).Set("held = held").Where(periodKey, p.AccountID, p.Variant, p.EventType).Exec(ctx); err != nil {
		return false, fmt.Errorf("account quiet period: %w", err)
	}
	held, err := tx.NewSelect().Model((*noticeHold)(nil)).Where("webhook_id = ?", w.ID).Where("event_type = ?", NoticeFailing).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("held notices: %w", err)
	}
	return held, nil
}

// holdNotice records that notice ev, about webhook w, is held for the summary of its period.
func holdNotice(ctx context.Context, tx bun.IDB, ev *Event, w *Webhook) error {
	h := &noticeHold{EventID: ev.ID, AccountID: ev.AccountID, Variant: ev.Variant, EventType: ev.EventType, WebhookID: w.ID}
	if _, err := tx.NewInsert().Model(h).Exec(ctx); err != nil {
		return fmt.Errorf("hold notice: %w", err)
	}
	return nil
}

// EndAccountQuietPeriods ends the account rule's quiet periods that are over, up to limit of them:
// a period that held notices records their summary, to the e-mail and chats of the account and
// variant that want its type, and begins a new period (a storm that goes on is told once a
// period); one that held none just ends. It returns the summaries recorded, whose deliveries the
// caller starts (the sweeper, which calls it). Each period is judged and changed in one
// transaction, compare-and-set on its row, so replicas record one summary.
func EndAccountQuietPeriods(ctx context.Context, db bun.IDB, rules NoticePolicy, limit int64) ([]*PublishResult, error) {
	var due []noticeQuiet
	err := db.NewSelect().Model(&due).Column("account_id", "variant", "event_type").Where("quiet_until <= ?", Now()).
		OrderExpr("quiet_until").Limit(limit).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("find account quiet periods over: %w", err)
	}
	var out []*PublishResult
	for _, p := range due {
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			now := Now()
			res, err := tx.NewUpdate().Model((*noticeQuiet)(nil)).Set("held = 0").Set("quiet_until = ?", now.Add(rules.QuietPeriod())).
				Where(periodKey, p.AccountID, p.Variant, p.EventType).Where("quiet_until <= ?", now).Where("held > 0").Exec(ctx)
			if err != nil {
				return fmt.Errorf("end account quiet period: %w", err)
			}
			if summarise, err := affectedOne(res); err != nil || !summarise {
				if err == nil {
					_, err = tx.NewDelete().Model((*noticeQuiet)(nil)).Where(periodKey, p.AccountID, p.Variant, p.EventType).
						Where("quiet_until <= ?", now).Where("held = 0").Exec(ctx)
				}
				return err
			}
			pr, err := recordSummary(ctx, tx, rules, &p, now)
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

// heldGroup is the notices a period held about one webhook.
type heldGroup struct {
	WebhookID int64 `bun:"webhook_id"`
	N         int   `bun:"n"`
	First     int64 `bun:"first_id"`
	Last      int64 `bun:"last_id"`
}

// recordSummary records the summary of period p, whose row tx has just written, from its holds,
// which it then deletes: nil when no channel wants it any more.
func recordSummary(ctx context.Context, tx bun.Tx, rules NoticePolicy, p *noticeQuiet, now time.Time) (*PublishResult, error) {
	var groups []heldGroup
	err := tx.NewSelect().Model((*noticeHold)(nil)).ColumnExpr("webhook_id, COUNT(*) AS n, MIN(event_id) AS first_id, MAX(event_id) AS last_id").
		Where(periodKey, p.AccountID, p.Variant, p.EventType).Group("webhook_id").OrderExpr("first_id").Scan(ctx, &groups)
	if err != nil {
		return nil, fmt.Errorf("held notices: %w", err)
	}
	if _, err := tx.NewDelete().Model((*noticeHold)(nil)).Where(periodKey, p.AccountID, p.Variant, p.EventType).Exec(ctx); err != nil {
		return nil, fmt.Errorf("held notices: %w", err)
	}
	var people []Webhook
	err = tx.NewSelect().Model(&people).Column("id", "url", "kind", "notice_types").
		Where("account_id = ?", p.AccountID).Where("variant = ?", p.Variant).Where("kind IN (?)", bun.List([]string{KindNoticeEmail, KindNoticeChat})).
		Where("disabled_at IS NULL").OrderExpr("id ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("find notification endpoints: %w", err)
	}
	people = slices.DeleteFunc(people, func(c Webhook) bool { return !c.Wants(p.EventType) })
	if len(groups) == 0 || len(people) == 0 {
		return nil, nil
	}
	s, err := summarise(ctx, tx, groups)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(rules.SummaryData(p.AccountID, p.Variant, s, now))
	if err != nil {
		return nil, fmt.Errorf("encode summary: %w", err)
	}
	canonical, err := wire.CanonicalJSON(data)
	if err != nil {
		return nil, fmt.Errorf("encode summary: %w", err)
	}
	// A notice's data has one version: no table of versions is needed.
	return insertEvent(ctx, tx, statementsOf(tx), nil, NewEvent{
		AccountID: p.AccountID, Variant: p.Variant, EventType: p.EventType, Data: string(canonical), Notice: s.Listed[0].WebhookID, Channels: people,
	})
}

// summarise is the account of the held notices groups, as their rows tell it: each webhook's
// status now, and the last error of its latest notice. The policy's SummaryData adds the links.
func summarise(ctx context.Context, tx bun.Tx, groups []heldGroup) (*NoticeSummary, error) {
	listed := groups[:min(len(groups), SummaryListed)]
	ids, events := []int64{}, []int64{groups[0].First}
	for _, g := range listed {
		ids, events = append(ids, g.WebhookID), append(events, g.Last)
	}
	var hooks []Webhook
	if err := tx.NewSelect().Model(&hooks).WhereAllWithDeleted().Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("summarised webhooks: %w", err)
	}
	var evs []Event
	if err := tx.NewSelect().Model(&evs).Where("id IN (?)", bun.List(events)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("summarised notices: %w", err)
	}
	byID := map[int64]*Webhook{}
	for i := range hooks {
		byID[hooks[i].ID] = &hooks[i]
	}
	evByID := map[int64]*Event{}
	for i := range evs {
		evByID[evs[i].ID] = &evs[i]
	}
	s := &NoticeSummary{Webhooks: len(groups)}
	if ev := evByID[groups[0].First]; ev != nil {
		s.Since = ev.CreatedAt.UTC()
	}
	for _, g := range groups {
		s.Notices += g.N
	}
	for _, g := range listed {
		e := SummaryWebhook{WebhookID: g.WebhookID, Notices: g.N, Status: "deleted"}
		if ev := evByID[g.Last]; ev != nil {
			d := DecodeNoticeData(ev)
			e.URL, e.EventType, e.LastError = d.URL, d.EventType, d.LastError
		}
		if w := byID[g.WebhookID]; w != nil {
			e.URL, e.EventType = w.URL, w.EventType
			if w.DeletedAt == nil {
				e.Status = w.Status
			}
		}
		s.Listed = append(s.Listed, e)
	}
	return s, nil
}
