package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Who disabled a webhook, kept in its disabled_reason.
const (
	// DisabledAuto: the service, because the webhook failed for too long (notices.DisableRule).
	DisabledAuto = "auto"
	// DisabledManual: the owner, at POST <collection>/<id>/disable.
	DisabledManual = "manual"
)

// Disabled reports whether the webhook is disabled: no attempt may be made for it.
func (w *Webhook) Disabled() bool { return w.DisabledAt != nil }

// ExhaustResult says what an exhaustion did to its webhook, which is when the owner is e-mailed:
// once per move, and only the disable e-mail when one exhaustion did both.
type ExhaustResult struct {
	// Alert: this call moved the webhook into its variant's failing status.
	Alert bool
	// Disabled: this call disabled the webhook.
	Disabled bool
	// Notices are the notices recorded with the moves, whose deliveries the caller starts.
	Notices []*PublishResult
}

// setDisabled disables the webhooks q selects that are not disabled yet. Variant B's status says
// so too; variant A keeps its specified statuses and shows the disabled flag instead.
func setDisabled(q *bun.UpdateQuery, now time.Time, reason string) *bun.UpdateQuery {
	return setStatusByVariant(q.Set("disabled_at = ?", now).Set("disabled_reason = ?", reason),
		func(s *VariantSpec) string { return s.DisabledStatus }).
		Set("updated_at = ?", now).
		Where("disabled_at IS NULL")
}

// setEnabled enables the disabled webhooks q selects, as a fresh start: the failure record and the
// alert are cleared, so the next exhaustion alerts again and auto-disable counts from zero.
// status_at moves, so an attempt that started while the webhook was disabled cannot set its status.
func setEnabled(q *bun.UpdateQuery, now time.Time) *bun.UpdateQuery {
	return setStatusByVariant(q.Set("disabled_at = NULL, disabled_reason = NULL, failing_since = NULL, exhausted_count = 0, alerted_at = NULL, warned_at = NULL"),
		func(s *VariantSpec) string { return s.EnabledStatus }).
		Set("status_at = ?", now).
		Set("updated_at = ?", now).
		Where("disabled_at IS NOT NULL")
}

// setStatusByVariant sets the status each variant's spec gives (statusOf), over webhooks of any
// variant; a variant whose spec gives none keeps its status.
func setStatusByVariant(q *bun.UpdateQuery, statusOf func(*VariantSpec) string) *bun.UpdateQuery {
	expr, args := "CASE", []any{}
	for _, v := range Variants {
		if status := statusOf(v.Spec()); status != "" {
			expr += " WHEN variant = ? THEN ?"
			args = append(args, v, status)
		}
	}
	if len(args) == 0 {
		return q
	}
	return q.Set("status = "+expr+" ELSE status END", args...)
}

// DisableWebhook disables a webhook within scope on a person's request (by: ActorAPI, ActorPortal) and returns it, with the webhook.disabled notice recorded
// in the same transaction (nil when no channel wants it). Disabling a disabled webhook changes
// nothing and tells nobody, so the first disabled_at and reason stay. now stamps the change.
func DisableWebhook(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, by string, rules NoticePolicy, now time.Time) (*Webhook, *PublishResult, error) {
	return changeWebhook(ctx, db, scope, id, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return setDisabled(q, now, DisabledManual)
	}, rules, Notice{Type: NoticeDisabled, By: by})
}

// EnableWebhook enables a webhook within scope and returns it, with the webhook.enabled notice
// recorded in the same transaction. Enabling an enabled webhook changes nothing. Deliveries held
// while it was disabled stay exhausted until a manual retry. now stamps the change.
func EnableWebhook(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, by string, rules NoticePolicy, now time.Time) (*Webhook, *PublishResult, error) {
	return changeWebhook(ctx, db, scope, id, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return setEnabled(q, now)
	}, rules, Notice{Type: NoticeEnabled, By: by})
}

// ReenableWebhook enables a webhook the caller already found in its scope, as EnableWebhook does:
// a manual retry's promise in both variants.
func ReenableWebhook(ctx context.Context, db bun.IDB, webhookID int64) error {
	if _, err := setEnabled(db.NewUpdate().Model((*Webhook)(nil)).Where("id = ?", webhookID), Now()).Exec(ctx); err != nil {
		return fmt.Errorf("re-enable webhook: %w", err)
	}
	return nil
}

// changeWebhook applies change to one webhook within scope and reads it back, or ErrNotFound.
// When the change moved the webhook, it records notice n about it in the same transaction.
func changeWebhook(ctx context.Context, db bun.IDB, scope WebhookScope, id int64, change func(*bun.UpdateQuery) *bun.UpdateQuery,
	rules NoticePolicy, n Notice) (*Webhook, *PublishResult, error) {
	var w *Webhook
	var notice *PublishResult
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		q := scope.changes(tx.NewUpdate().Model((*Webhook)(nil))).Where("id = ?", id)
		res, err := change(q).Exec(ctx)
		if err != nil {
			return fmt.Errorf("change webhook: %w", err)
		}
		moved, err := affectedOne(res)
		if err != nil {
			return fmt.Errorf("change webhook: %w", err)
		}
		if w, err = GetWebhook(ctx, tx, scope, id); err != nil {
			return err
		}
		if moved && n.Type != "" {
			n.Webhook = w
			notice, err = RecordNotice(ctx, tx, rules, n)
		}
		return err
	})
	return w, notice, err
}
