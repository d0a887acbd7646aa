package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// A delivery's lifecycle, in one place: its states, the named sets of states the rest of the code
// asks for, the transitions between states, and the only code that writes deliveries.state. A new
// state or transition is a change here, and TestLifecycleTransitions walks every writer from every
// state and refuses a move the table does not list.

// Delivery states, mirrored in the workflow's DeliveryState search attribute.
const (
	DeliveryPending    = "pending"
	DeliveryDelivering = "delivering"
	DeliveryRetrying   = "retrying"
	DeliveryDelivered  = "delivered"
	DeliveryExhausted  = "exhausted"
	DeliveryCanceled   = "canceled"
)

// DeliveryStates are every state, in the order a delivery moves through them.
var DeliveryStates = []string{DeliveryPending, DeliveryDelivering, DeliveryRetrying, DeliveryDelivered, DeliveryExhausted, DeliveryCanceled}

// Named sets of states.
var (
	// UnderwayStates: the delivery's schedule is running (an attempt, or the wait for the next).
	UnderwayStates = []string{DeliveryPending, DeliveryDelivering, DeliveryRetrying}
	// OpenStates: the delivery has not ended for good; deleting its webhook cancels it.
	OpenStates = []string{DeliveryPending, DeliveryDelivering, DeliveryRetrying, DeliveryExhausted}
	// EndedStates: no workflow writes the delivery again on its own: it was delivered, canceled,
	// or exhausted (its workflow then waits at most its retry window, which retention outlasts:
	// WEBHOOKD_RETENTION is refused when it is not a day longer). Retention deletes only these;
	// the others have a workflow at work (or about to be started by the sweeper), however old.
	EndedStates = []string{DeliveryDelivered, DeliveryExhausted, DeliveryCanceled}
	// RecoverableStates: the delivery has not succeeded, and a recovery covers it: exhausted,
	// waiting in its schedule, or with an attempt in flight (InFlightStates), which the recovery
	// retries if that attempt fails. They are the open states.
	RecoverableStates = OpenStates
	// InFlightStates: the delivery may have an attempt in flight: its first (pending), or a later
	// one, its last included until the workflow marks it exhausted (delivering).
	InFlightStates = []string{DeliveryPending, DeliveryDelivering}
	// ResendableStates: a resend may run the delivery again (all but canceled).
	ResendableStates = []string{DeliveryPending, DeliveryDelivering, DeliveryRetrying, DeliveryDelivered, DeliveryExhausted}
	// RetriableStates: a manual retry of a webhook runs these deliveries again.
	RetriableStates = []string{DeliveryExhausted}
	// claimMoves: a claim moves a delivery in these states to delivering, since its workflow's
	// schedule had ended; one still in its schedule keeps its state.
	claimMoves = []string{DeliveryExhausted, DeliveryDelivered}
)

// Transition is a move of a delivery from one state to another, and the writer that makes it.
type Transition struct {
	From, To string
	By       string
}

// Writers of deliveries.state, as Transitions name them.
const (
	ByCreate  = "create"      // InsertEvent: a new delivery
	ByAttempt = "attempt"     // RecordAttempt
	ByExhaust = "exhaust"     // MarkExhausted
	ByHold    = "hold"        // HoldDelivery
	ByClaim   = "claim"       // ClaimDelivery
	ByRestore = "restore"     // RestoreClaim
	BySettle  = "settle"      // SettleClaim
	ByCancel  = "cancel"      // CancelDelivery
	ByDelete  = "cancel-open" // CancelOpenDeliveries
)

// Transitions are every move a delivery's state may make. Canceled is final.
var Transitions = func() []Transition {
	var ts []Transition
	add := func(by string, from []string, to ...string) {
		for _, f := range from {
			for _, t := range to {
				if f != t {
					ts = append(ts, Transition{From: f, To: t, By: by})
				}
			}
		}
	}
	add(ByCreate, []string{""}, DeliveryPending)
	// An attempt's outcome: delivered; retrying, with a next attempt; delivering, with none left
	// (the workflow exhausts it next). Attempts run from any state but canceled: an operator's
	// retry signal reaches a delivery the table still shows exhausted, a resend one delivered.
	add(ByAttempt, []string{DeliveryPending, DeliveryDelivering, DeliveryRetrying, DeliveryDelivered, DeliveryExhausted},
		DeliveryDelivered, DeliveryRetrying, DeliveryDelivering)
	add(ByExhaust, UnderwayStates, DeliveryExhausted)
	add(ByHold, UnderwayStates, DeliveryExhausted)
	add(ByClaim, claimMoves, DeliveryDelivering)
	add(ByRestore, []string{DeliveryDelivering}, DeliveryStates[:len(DeliveryStates)-1]...)
	add(BySettle, []string{DeliveryDelivering}, DeliveryDelivered, DeliveryExhausted)
	add(ByCancel, OpenStates, DeliveryCanceled)
	add(ByDelete, OpenStates, DeliveryCanceled)
	return ts
}()

// AllowedBy reports whether the table lets writer by move a delivery from one state to another.
func AllowedBy(by, from, to string) bool {
	return slices.Contains(Transitions, Transition{From: from, To: to, By: by})
}

const (
	// attemptDeliverySQL records an attempt's outcome on its delivery (attemptState). A canceled
	// delivery stays canceled: its webhook was deleted while the attempt ran.
	attemptDeliverySQL = `UPDATE "deliveries" AS "delivery" SET state = ?, ` +
		`attempts = CASE WHEN attempts < ? THEN ? ELSE attempts END, last_error = ?, next_attempt_at = ?, ` +
		`updated_at = ? WHERE (id = ?) AND (state <> 'canceled')`
)

// insertDeliveries inserts an event's deliveries, pending, and sets their ids and state. Each takes one prepared
// insert, except several on PostgreSQL: one multi-row insert there saves round trips, where on
// SQLite, in process, it would return its ids through RETURNING and so keep a statement journal
// (insertRow).
func insertDeliveries(ctx context.Context, tx bun.Tx, s *statements, deliveries []Delivery) error {
	for i := range deliveries {
		deliveries[i].State = DeliveryPending
	}
	if len(deliveries) > 1 && IsPostgres(tx) {
		_, err := tx.NewInsert().Model(&deliveries).Returning("id").Exec(ctx)
		return err
	}
	for i := range deliveries {
		d := &deliveries[i]
		id, err := s.insertRow(ctx, tx, s.text.insertDelivery, fieldValues(s.text.deliveryFields, d)...)
		if err != nil {
			return err
		}
		if id == 0 {
			return errors.New("no row inserted")
		}
		d.ID = id
	}
	return nil
}

// attemptState is the state an attempt's outcome moves its delivery to.
func attemptState(o AttemptOutcome) string {
	switch {
	case o.Success:
		return DeliveryDelivered
	case o.NextAttemptAt != nil:
		return DeliveryRetrying
	}
	return DeliveryDelivering // the workflow moves it to exhausted next
}

// exhaustDelivery marks a delivery whose schedule ran out exhausted, and reports whether this call
// did (a retried activity counts once).
func exhaustDelivery(ctx context.Context, tx bun.IDB, deliveryID int64) (bool, error) {
	marked, err := tx.NewUpdate().Model((*Delivery)(nil)).
		Set("state = ?", DeliveryExhausted).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("id = ?", deliveryID).Where("state IN (?)", bun.List(UnderwayStates)).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("update delivery: %w", err)
	}
	n, err := marked.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update delivery: %w", err)
	}
	return n == 1, nil
}

// HoldDelivery records that a delivery stopped without an attempt (its webhook is disabled, or an
// error no retry can fix): it is exhausted, with reason as its last error, so a manual retry picks
// it up. A delivery that has ended is left alone.
func HoldDelivery(ctx context.Context, db bun.IDB, deliveryID int64, reason string) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).
		Set("state = ?", DeliveryExhausted).Set("last_error = ?", reason).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("id = ?", deliveryID).Where("state IN (?)", bun.List(append(UnderwayStates, DeliveryExhausted))).Exec(ctx)
	if err != nil {
		return fmt.Errorf("hold delivery: %w", err)
	}
	return nil
}

// ClaimDelivery claims one delivery for a manual retry, right before its workflow is signaled or
// run again, and reports whether it did. The claim is a compare-and-set: the delivery must be in
// one of the states from and not claimed already (a claim in flight, or one a crash left, which the
// sweeper repairs). A delivery that had ended, exhausted or delivered (a resend), moves to
// delivering, before the signal and not after: an attempt that finishes first must not have its
// outcome overwritten. One still in its schedule keeps its state: the signal only brings its next
// attempt forward. claimed_at records the claim until ReleaseClaim or RestoreClaim clears it.
func ClaimDelivery(ctx context.Context, db bun.IDB, deliveryID int64, from []string) (claimedAt time.Time, ok bool, err error) {
	now := Now()
	r, err := db.NewUpdate().Model((*Delivery)(nil)).
		Set("state = CASE WHEN state IN (?) THEN ? ELSE state END", bun.List(claimMoves), DeliveryDelivering).
		Set("claimed_at = ?", now).Set("updated_at = ?", now).
		Where("id = ?", deliveryID).Where("state IN (?)", bun.List(from)).Where("state <> ?", DeliveryCanceled).
		Where("claimed_at IS NULL").Exec(ctx)
	if err != nil {
		return now, false, fmt.Errorf("claim delivery %d for retry: %w", deliveryID, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return now, false, fmt.Errorf("claim delivery %d for retry: %w", deliveryID, err)
	}
	return now, n == 1, nil
}

// ReleaseClaim clears the claim made at claimedAt once its signal or start succeeded. A claim made
// since by another retry is left alone. The state stays as it is.
func ReleaseClaim(ctx context.Context, db bun.IDB, deliveryID int64, claimedAt time.Time) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("claimed_at = NULL").
		Where("id = ?", deliveryID).Where("claimed_at = ?", claimedAt).Exec(ctx)
	if err != nil {
		return fmt.Errorf("release the claim on delivery %d: %w", deliveryID, err)
	}
	return nil
}

// RestoreClaim undoes the claim made at claimedAt of a retry that did not happen (Temporal refused
// it): the delivery gets back its state as ref recorded it, unless an attempt has moved it on
// meanwhile, and the claim is cleared.
func RestoreClaim(ctx context.Context, db bun.IDB, ref DeliveryRef, claimedAt time.Time) error {
	if !slices.Contains(DeliveryStates, ref.State) || ref.State == DeliveryCanceled {
		return fmt.Errorf("restore delivery %d: %q is no state a claim leaves", ref.DeliveryID, ref.State)
	}
	_, err := db.NewUpdate().Model((*Delivery)(nil)).
		Set("state = CASE WHEN state = ? THEN ? ELSE state END", DeliveryDelivering, ref.State).
		Set("claimed_at = NULL").Set("updated_at = ?", Now()).
		Where("id = ?", ref.DeliveryID).Where("claimed_at = ?", claimedAt).Exec(ctx)
	if err != nil {
		return fmt.Errorf("restore delivery %d after a failed retry: %w", ref.DeliveryID, err)
	}
	return nil
}

// SettleClaim gives a delivery that a manual retry claimed (moved to delivering) back the state
// its workflow is in, exhausted or delivered, when the workflow found the retry already answered:
// an attempt had started after the retry was asked for, so no attempt follows the claim to record
// an outcome. A delivery no longer delivering is left alone.
func SettleClaim(ctx context.Context, db bun.IDB, deliveryID int64, state string) error {
	if state != DeliveryDelivered && state != DeliveryExhausted {
		return fmt.Errorf("settle the claim on delivery %d: %q is not where a workflow settles", deliveryID, state)
	}
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", state).Set("updated_at = ?", Now()).
		Where("id = ?", deliveryID).Where("state = ?", DeliveryDelivering).Exec(ctx)
	if err != nil {
		return fmt.Errorf("settle the claim on delivery %d: %w", deliveryID, err)
	}
	return nil
}

// CancelDelivery marks one delivery canceled unless it was delivered, as its canceled workflow
// ends, or as an attempt finds its webhook deleted. Running it twice is harmless.
func CancelDelivery(ctx context.Context, db bun.IDB, deliveryID int64) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryCanceled).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("id = ?", deliveryID).Where("state IN (?)", bun.List(OpenStates)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel delivery: %w", err)
	}
	return nil
}

// CancelOpenDeliveries marks every delivery of a webhook that has not ended as canceled, when the
// webhook is deleted.
func CancelOpenDeliveries(ctx context.Context, db bun.IDB, webhookID int64) error {
	_, err := db.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryCanceled).Set("next_attempt_at = NULL").Set("updated_at = ?", Now()).
		Where("webhook_id = ?", webhookID).Where("state IN (?)", bun.List(OpenStates)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel open deliveries: %w", err)
	}
	return nil
}
