package model

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Attempt is one HTTP exchange of a delivery, as shown at GET <collection>/<id>/deliveries.
type Attempt struct {
	bun.BaseModel `bun:"table:delivery_attempts"`

	ID           int64     `bun:"id,pk,autoincrement"`
	DeliveryID   int64     `bun:"delivery_id,notnull"`
	Attempt      int       `bun:"attempt,notnull"`
	URL          string    `bun:"url,notnull"`
	StartedAt    time.Time `bun:"started_at,notnull"`
	StatusCode   *int      `bun:"status_code"`
	ErrorClass   *string   `bun:"error_class"`
	Error        *string   `bun:"error"`
	LatencyMS    int64     `bun:"latency_ms,notnull"`
	ResponseBody *string   `bun:"response_body"`
	// RequestHeaders is the JSON object of the headers the attempt sent, signatures left out; nil
	// for attempts made before they were kept.
	RequestHeaders *string `bun:"request_headers"`
}

// DeliveryTarget is what one attempt needs: the event and the webhook (possibly deleted), with the
// webhook's signing secrets.
type DeliveryTarget struct {
	Event   Event
	Webhook Webhook
}

// deliveryTargetRow is one row of LoadDeliveryTarget's query: the webhook, its event, and one of
// the webhook's previous secrets (NULL when it has none, read as zero).
type deliveryTargetRow struct {
	Webhook `bun:",extend"`

	Ev   Event          `bun:"embed:ev_"`
	Prev PreviousSecret `bun:"embed:prev_"`
}

// LoadDeliveryTarget loads a delivery's event and webhook, with the webhook's previous secrets
// (newest first; rotations prune the expired ones, so there are few) in one query: it runs once per
// attempt. A deleted webhook is
// returned with DeletedAt set, so the caller can end the delivery without posting.
func LoadDeliveryTarget(ctx context.Context, db bun.IDB, deliveryID int64) (*DeliveryTarget, error) {
	s := statementsOf(db)
	var rows []deliveryTargetRow
	if err := s.query(ctx, db, &rows, s.text.deliveryTarget, deliveryID); err != nil {
		return nil, fmt.Errorf("load delivery: %w", err)
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	t := &DeliveryTarget{Webhook: rows[0].Webhook, Event: rows[0].Ev}
	t.Webhook.PreviousSecrets = []PreviousSecret{}
	for _, r := range rows {
		if r.Prev.ID != 0 {
			t.Webhook.PreviousSecrets = append(t.Webhook.PreviousSecrets, r.Prev)
		}
	}
	return t, nil
}

// AttemptOutcome is the result of one attempt, to be recorded.
type AttemptOutcome struct {
	Attempt
	Success bool
	// NextAttemptAt is when the schedule tries again after a failure; nil when it will not.
	NextAttemptAt *time.Time
}

// RecordAttempt writes an attempt, the delivery's progress and the webhook's status in one
// transaction. Status writes are compare-and-set on the attempt's start time: an older attempt that
// finishes late never overwrites the outcome of a newer one.
func RecordAttempt(ctx context.Context, db bun.IDB, w *Webhook, o AttemptOutcome) error {
	// Prepared before the transaction begins, not inside it: see statements.prepare.
	s := statementsOf(db)
	if err := s.prepare(ctx, db); err != nil {
		return err
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// A retried activity may record the same attempt twice; the later outcome wins.
		a := o.Attempt
		if _, err := s.exec(ctx, tx, s.text.upsertAttempt, fieldValues(s.text.attemptFields, &a)...); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		if _, err := s.exec(ctx, tx, attemptDeliverySQL, attemptState(o), a.Attempt, a.Attempt, a.Error, o.NextAttemptAt,
			Now(), a.DeliveryID); err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		return recordWebhookOutcome(ctx, tx, s, w, o.Success, o.StartedAt)
	})
}

// StatusResolution is how far behind an attempt a webhook's status time (status_at, with
// last_success_at and last_triggered_at, the variant B list's lastTriggered) may lag while the
// attempt changes nothing else. Under steady traffic the row is then written once per
// StatusResolution rather than once per attempt, and concurrent attempts to one webhook do not
// queue on its row lock.
const StatusResolution = time.Second

// recordWebhookOutcome writes an attempt's outcome into its webhook's status. The row is written
// only when the outcome changes it (a status, a failure record, last_status) or the status time
// lags the attempt by StatusResolution or more. The decision is made by the UPDATE's own WHERE
// against the row as it is now, not by the copy loaded before the attempt, which may be stale.
func recordWebhookOutcome(ctx context.Context, tx bun.Tx, s *statements, w *Webhook, success bool, at time.Time) error {
	query, args := webhookOutcomeSQL(w.Variant.Spec(), success, w.ID, at, Now())
	if _, err := s.exec(ctx, tx, query, args...); err != nil {
		return fmt.Errorf("update webhook status: %w", err)
	}
	return nil
}

// webhookOutcomeSQL is recordWebhookOutcome's UPDATE of webhook id for an attempt of a webhook of
// spec that started at and ended now, with ? placeholders, and its arguments. Its text depends only
// on spec and success, so each variant has two, prepared with the hot statements.
func webhookOutcomeSQL(spec *VariantSpec, success bool, id int64, at, now time.Time) (string, []any) {
	var sets, changes []string
	var setArgs, changeArgs []any
	set := func(expr string, args ...any) {
		sets = append(sets, expr)
		setArgs = append(setArgs, args...)
	}
	// change: what this outcome would change besides the times.
	change := func(cond string, args ...any) {
		changes = append(changes, cond)
		changeArgs = append(changeArgs, args...)
	}
	healsFrom := "NULL" // as bun.In writes an empty list
	if len(spec.HealsFrom) > 0 {
		healsFrom = strings.Repeat("?, ", len(spec.HealsFrom)-1) + "?"
	}
	healsArgs := func(then ...any) []any {
		args := make([]any, 0, len(spec.HealsFrom)+len(then))
		for _, s := range spec.HealsFrom {
			args = append(args, s)
		}
		return append(args, then...)
	}
	set("status_at = ?", at)
	if success {
		set("last_success_at = ?", at)
		set("updated_at = CASE WHEN status IN ("+healsFrom+") THEN ? ELSE updated_at END", healsArgs(now)...)
		set("status = CASE WHEN status IN ("+healsFrom+") THEN ? ELSE status END", healsArgs(spec.HealedStatus)...)
		set("alerted_at = NULL")
		change("status IN ("+healsFrom+") OR alerted_at IS NOT NULL", healsArgs()...)
	} else if spec.FailedAttemptStatus != "" {
		set("updated_at = CASE WHEN status <> ? THEN ? ELSE updated_at END", spec.FailedAttemptStatus, now)
		set("status = ?", spec.FailedAttemptStatus)
		change("status <> ?", spec.FailedAttemptStatus)
	}
	if spec.LastStatus {
		// failure_count counts failed deliveries, not attempts: MarkExhausted adds one per
		// delivery whose schedule ran out.
		last := LastStatusFailed
		if success {
			last = LastStatusSuccess
		}
		set("last_triggered_at = ?", at)
		set("last_status = ?", last)
		change("last_status IS NULL OR last_status <> ?", last)
	}
	// The failure record that auto-disable reads (DisableRule), and failure_count. A success clears
	// them but does not enable a disabled webhook: only its owner does (enable, a new URL, a manual retry).
	if success {
		set("failing_since = NULL, exhausted_count = 0, failure_count = 0")
		change("failing_since IS NOT NULL OR exhausted_count <> 0 OR failure_count <> 0")
	} else {
		set("failing_since = COALESCE(failing_since, ?)", at)
		change("failing_since IS NULL")
	}
	query := `UPDATE "webhooks" AS "webhook" SET ` + strings.Join(sets, ", ") +
		` WHERE (id = ?) AND ((status_at IS NULL OR status_at <= ?))` +
		` AND ((status_at IS NULL OR status_at <= ? OR ` + strings.Join(changes, " OR ") + `))` +
		` AND "webhook"."deleted_at" IS NULL`
	args := append(setArgs, id, at, at.Add(-StatusResolution))
	return query, append(args, changeArgs...)
}

// MarkExhausted records that a delivery's schedule ran out, moves its webhook into the variant's
// failing status and, when rule says the webhook has failed long enough, disables it.
//
// Alert reports that this call made the move into failing: a webhook already failing (and
// alerted) is not alerted again until a success clears it. Disabled reports that this call
// disabled the webhook; then Alert is false, so the owner gets one e-mail, the disable one.
// Both moves are compare-and-set on the webhook row, so concurrent exhaustions make each once.
// lastAttemptAt guards against an older delivery failing a webhook that a newer success healed.
func MarkExhausted(ctx context.Context, db bun.IDB, deliveryID, webhookID int64, lastAttemptAt time.Time, rule DisableRule) (ExhaustResult, error) {
	var res ExhaustResult
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// Only the call that exhausts the delivery counts it: a retried activity counts once.
		counted, err := exhaustDelivery(ctx, tx, deliveryID)
		if err != nil {
			return err
		}
		w := &Webhook{}
		if err := tx.NewSelect().Model(w).Where("id = ?", webhookID).Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // deleted meanwhile: nobody to alert
			}
			return fmt.Errorf("load webhook: %w", err)
		}
		failing := w.Variant.Spec().FailingStatus
		now := Now()
		healed := "(last_success_at IS NULL OR last_success_at <= ?)"
		moved, err := tx.NewUpdate().Model((*Webhook)(nil)).
			Set("updated_at = CASE WHEN status <> ? THEN ? ELSE updated_at END", failing, now).
			Set("status = ?", failing).
			Set("alerted_at = ?", now).
			Where("id = ?", webhookID).
			Where("alerted_at IS NULL").
			Where("disabled_at IS NULL"). // variant B's status "disabled" follows from it
			Where(healed, lastAttemptAt).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("mark webhook failing: %w", err)
		}
		if res.Alert, err = affectedOne(moved); err != nil {
			return fmt.Errorf("mark webhook failing: %w", err)
		}
		if !counted {
			return nil
		}
		// An exhaustion older than the last success is not part of the current failure. Its
		// attempt normally set failing_since already; a missing start time counts from now.
		// failure_count (failed deliveries since the last success) counts here, once per
		// delivery like exhausted_count, and unlike it survives a new URL or an enable.
		since := lastAttemptAt
		if since.IsZero() {
			since = now
		}
		if _, err := tx.NewUpdate().Model((*Webhook)(nil)).
			Set("exhausted_count = exhausted_count + 1").
			Set("failure_count = failure_count + 1").
			Set("failing_since = COALESCE(failing_since, ?)", since).
			Where("id = ?", webhookID).Where(healed, lastAttemptAt).
			Exec(ctx); err != nil {
			return fmt.Errorf("count exhausted delivery: %w", err)
		}
		if rule.After <= 0 {
			return nil
		}
		disabled, err := setDisabled(tx.NewUpdate().Model((*Webhook)(nil)), now, DisabledAuto).
			Where("id = ?", webhookID).
			Where("failing_since <= ?", now.Add(-rule.After)).
			Where("exhausted_count >= ?", rule.MinExhausted).
			Where(healed, lastAttemptAt).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("disable webhook: %w", err)
		}
		if res.Disabled, err = affectedOne(disabled); err != nil {
			return fmt.Errorf("disable webhook: %w", err)
		}
		if res.Disabled {
			res.Alert = false // one e-mail per move: the disable one says it all
		}
		return nil
	})
	if err != nil {
		return ExhaustResult{}, err
	}
	return res, nil
}

func affectedOne(r sql.Result) (bool, error) {
	n, err := r.RowsAffected()
	return n == 1, err
}
