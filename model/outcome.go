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
	// State and Attempts are the delivery's, as recorded: AlreadyDelivered reads them.
	State    string
	Attempts int
	// LaneSeq is the delivery's number in its lane, nil when its webhook is not ordered.
	LaneSeq *int64
}

// AlreadyDelivered reports whether attempt was recorded as the one that delivered: the attempt runs
// again after its outcome was written and its result lost (a first attempt, run as a local
// activity, whose workflow task was failed by a signal that came in meanwhile; a worker that died
// before it reported the activity's completion). A resend's attempt is numbered after the one that
// delivered, and is made.
func (t *DeliveryTarget) AlreadyDelivered(attempt int) bool {
	return t.State == DeliveryDelivered && attempt > 0 && t.Attempts >= attempt
}

// deliveryTargetRow is one row of LoadDeliveryTarget's query: the webhook, its event, and one of
// the webhook's previous secrets (NULL when it has none, read as zero).
type deliveryTargetRow struct {
	Webhook `bun:",extend"`

	Ev   Event          `bun:"embed:ev_"`
	Prev PreviousSecret `bun:"embed:prev_"`

	DState    string `bun:"d_state"`
	DAttempts int    `bun:"d_attempts"`
	DLaneSeq  *int64 `bun:"d_lane_seq"`
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
	t := &DeliveryTarget{Webhook: rows[0].Webhook, Event: rows[0].Ev, State: rows[0].DState, Attempts: rows[0].DAttempts,
		LaneSeq: rows[0].DLaneSeq}
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
	// Rules judge and word the notice a success may make (webhook.recovered).
	Rules NoticePolicy
}

// RecordAttempt writes an attempt, the delivery's progress and the webhook's status in one
// transaction. Status writes are compare-and-set on the attempt's start time: an older attempt that
// finishes late never overwrites the outcome of a newer one.
//
// A success of a webhook that was told failing (w, as loaded for the attempt, has AlertedAt) also
// records webhook.recovered, once: the first such success clears alerted_at, compare-and-set, and
// starts the storm rule's quiet period. It returns that notice (nil for none), whose deliveries the
// caller starts. A webhook loaded before it was alerted and healed by this attempt keeps alerted_at
// until its next success, which tells the recovery then; a healthy webhook's success costs nothing more.
func RecordAttempt(ctx context.Context, db bun.IDB, w *Webhook, o AttemptOutcome) (*PublishResult, error) {
	// Prepared before the transaction begins, not inside it: see statements.prepare.
	s := statementsOf(db)
	if err := s.prepare(ctx, db); err != nil {
		return nil, err
	}
	var recovered *PublishResult
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// A retried activity may record the same attempt twice; the later outcome wins.
		a := o.Attempt
		if _, err := s.exec(ctx, tx, s.text.upsertAttempt, fieldValues(s.text.attemptFields, &a)...); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		if _, err := s.exec(ctx, tx, attemptDeliverySQL, attemptState(o), a.Attempt, a.Attempt, a.Error, o.NextAttemptAt,
			Now(), a.DeliveryID); err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		if err := recordWebhookOutcome(ctx, tx, s, w, o.Success, o.StartedAt); err != nil {
			return err
		}
		if !o.Success || w.AlertedAt == nil {
			return nil
		}
		var err error
		recovered, err = recordRecovery(ctx, tx, w.ID, o.Rules)
		return err
	})
	return recovered, err
}

// recordRecovery ends webhook id's failure as its notices see it (alerted_at), once, and records
// webhook.recovered; the storm rule's quiet period starts.
func recordRecovery(ctx context.Context, tx bun.Tx, id int64, rules NoticePolicy) (*PublishResult, error) {
	var quiet *time.Time
	if q := rules.QuietPeriod(); q > 0 {
		until := Now().Add(q)
		quiet = &until
	}
	res, err := tx.NewUpdate().Model((*Webhook)(nil)).Set("alerted_at = NULL").Set("quiet_until = ?", quiet).
		Where("id = ?", id).Where("alerted_at IS NOT NULL").Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("record recovery: %w", err)
	}
	if moved, err := affectedOne(res); err != nil || !moved {
		return nil, err
	}
	w := &Webhook{}
	if err := tx.NewSelect().Model(w).WhereAllWithDeleted().Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("record recovery: %w", err)
	}
	return RecordNotice(ctx, tx, rules, Notice{Type: NoticeRecovered, Webhook: w})
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
		change("status IN ("+healsFrom+")", healsArgs()...)
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
	// The failure record that auto-disable reads (notices.DisableRule), and failure_count. A success clears
	// them but does not enable a disabled webhook: only its owner does (enable, a new URL, a manual retry).
	if success {
		set("failing_since = NULL, exhausted_count = 0, failure_count = 0, warned_at = NULL")
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

// Exhaustion is a delivery whose schedule ran out: its webhook, its event, when its last attempt
// started and how it failed.
type Exhaustion struct {
	DeliveryID, WebhookID, EventID int64
	LastAttemptAt                  time.Time
	LastError                      *NoticeError
}

// MarkExhausted records that a delivery's schedule ran out, moves its webhook into the variant's
// failing status and, when the rules' auto-disable rule says it has failed long enough, disables it; with them,
// in the same transaction, it records the notices these moves make (docs/notifications.md).
//
// Alert reports that this call made the move into failing and recorded webhook.failing: a webhook
// already failing (and alerted) is not alerted again until a success clears it, and within the
// storm rule's quiet period the move is counted instead (the next notice says how many).
// Disabled reports that this call disabled the webhook; then Alert is false, so the owner hears
// once, of the disable. Each move is compare-and-set on the webhook row, so concurrent exhaustions
// make each once. lastAttemptAt guards against an older delivery failing a webhook that a newer
// success healed.
func MarkExhausted(ctx context.Context, db bun.IDB, ex Exhaustion, rules NoticePolicy) (ExhaustResult, error) {
	var res ExhaustResult
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// Only the call that exhausts the delivery counts it: a retried activity counts once.
		counted, err := exhaustDelivery(ctx, tx, ex.DeliveryID)
		if err != nil {
			return err
		}
		before := &Webhook{}
		if err := tx.NewSelect().Model(before).Where("id = ?", ex.WebhookID).Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // deleted meanwhile: nobody to alert
			}
			return fmt.Errorf("load webhook: %w", err)
		}
		now := Now()
		if res.Alert, err = markFailing(ctx, tx, before, ex.LastAttemptAt, now); err != nil {
			return err
		}
		var warned bool
		if counted {
			if res.Disabled, warned, err = countExhausted(ctx, tx, ex, rules, now); err != nil {
				return err
			}
		}
		if res.Disabled {
			res.Alert = false // one notice per move: the disable says it all
		}
		w := &Webhook{}
		if err := tx.NewSelect().Model(w).Where("id = ?", ex.WebhookID).Scan(ctx); err != nil {
			return fmt.Errorf("load webhook: %w", err)
		}
		var notices []Notice
		switch {
		case res.Disabled:
			notices = append(notices, Notice{Type: NoticeDisabled, By: ActorRule})
		case res.Alert:
			notices = append(notices, Notice{Type: NoticeFailing, Suppressed: before.SuppressedNotices})
		}
		if warned && !res.Disabled && w.FailingSince != nil {
			after, _, _ := rules.DisableLimits()
			at := w.FailingSince.Add(after)
			notices = append(notices, Notice{Type: NoticeDisabling, DisableAt: &at})
		}
		if counted {
			notices = append(notices, Notice{Type: NoticeExhausted, DeliveryID: ex.DeliveryID, EventID: ex.EventID})
		}
		for _, n := range notices {
			n.Webhook, n.LastError = w, ex.LastError
			pr, err := RecordNotice(ctx, tx, rules, n)
			if err != nil {
				return err
			}
			if pr != nil {
				res.Notices = append(res.Notices, pr)
			}
		}
		return nil
	})
	if err != nil {
		return ExhaustResult{}, err
	}
	return res, nil
}

// healed is the guard of an exhaustion's moves: no success since its last attempt started.
const healed = "(last_success_at IS NULL OR last_success_at <= ?)"

// markFailing moves webhook w into its variant's failing status, and reports whether the move is
// to be told (webhook.failing): the first since the last success (or enable), outside the storm
// rule's quiet period. Within it, the status moves all the same and the transition is counted.
func markFailing(ctx context.Context, tx bun.Tx, w *Webhook, lastAttemptAt, now time.Time) (bool, error) {
	failing := w.Variant.Spec().FailingStatus
	move := func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Model((*Webhook)(nil)).
			Set("updated_at = CASE WHEN status <> ? THEN ? ELSE updated_at END", failing, now).
			Set("status = ?", failing).
			Where("id = ?", w.ID).
			Where("alerted_at IS NULL").
			Where("disabled_at IS NULL"). // variant B's status "disabled" follows from it
			Where(healed, lastAttemptAt)
	}
	moved, err := move(tx.NewUpdate()).Set("alerted_at = ?", now).Set("suppressed_notices = 0").
		Where("(quiet_until IS NULL OR quiet_until <= ?)", now).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("mark webhook failing: %w", err)
	}
	alert, err := affectedOne(moved)
	if err != nil || alert {
		return alert, err
	}
	// Quiet: the first exhaustion since the last success is a transition, counted.
	if _, err := move(tx.NewUpdate()).Set("suppressed_notices = suppressed_notices + CASE WHEN exhausted_count = 0 THEN 1 ELSE 0 END").
		Exec(ctx); err != nil {
		return false, fmt.Errorf("mark webhook failing: %w", err)
	}
	return false, nil
}

// countExhausted counts an exhausted delivery into its webhook's failure record, then disables the
// webhook when the auto-disable rule says so, or else warns once when the disable is near.
func countExhausted(ctx context.Context, tx bun.Tx, ex Exhaustion, rules NoticePolicy, now time.Time) (disabled, warned bool, err error) {
	// An exhaustion older than the last success is not part of the current failure. Its attempt
	// normally set failing_since already; a missing start time counts from now. failure_count
	// (failed deliveries since the last success) counts here, once per delivery like
	// exhausted_count, and unlike it survives a new URL or an enable.
	since := ex.LastAttemptAt
	if since.IsZero() {
		since = now
	}
	if _, err := tx.NewUpdate().Model((*Webhook)(nil)).
		Set("exhausted_count = exhausted_count + 1").
		Set("failure_count = failure_count + 1").
		Set("failing_since = COALESCE(failing_since, ?)", since).
		Where("id = ?", ex.WebhookID).Where(healed, ex.LastAttemptAt).
		Exec(ctx); err != nil {
		return false, false, fmt.Errorf("count exhausted delivery: %w", err)
	}
	after, minExhausted, warnLead := rules.DisableLimits()
	if after <= 0 {
		return false, false, nil
	}
	q, err := setDisabled(tx.NewUpdate().Model((*Webhook)(nil)), now, DisabledAuto).
		Where("id = ?", ex.WebhookID).
		Where("failing_since <= ?", now.Add(-after)).
		Where("exhausted_count >= ?", minExhausted).
		Where(healed, ex.LastAttemptAt).
		Exec(ctx)
	if err != nil {
		return false, false, fmt.Errorf("disable webhook: %w", err)
	}
	if disabled, err = affectedOne(q); err != nil || disabled || warnLead < 0 {
		return disabled, false, err
	}
	q, err = tx.NewUpdate().Model((*Webhook)(nil)).Set("warned_at = ?", now).
		Where("id = ?", ex.WebhookID).
		Where("warned_at IS NULL").Where("disabled_at IS NULL").
		Where("failing_since <= ?", now.Add(-(after-warnLead))).
		Where(healed, ex.LastAttemptAt).
		Exec(ctx)
	if err != nil {
		return false, false, fmt.Errorf("warn of a disable: %w", err)
	}
	warned, err = affectedOne(q)
	return false, warned, err
}

func affectedOne(r sql.Result) (bool, error) {
	n, err := r.RowsAffected()
	return n == 1, err
}
