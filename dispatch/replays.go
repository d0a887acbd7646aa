package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Replays (docs/api.md, "Replays"): a replay's deliveries were fixed when it was created
// (model.CreateReplay); its one workflow hands each over as a recovery does, claiming it first.

// StartReplay starts the workflow of replay id. Asked twice, it finds the first.
func (d *Dispatcher) StartReplay(ctx context.Context, id int64, matched int64) (string, error) {
	wid := workflows.ReplayWorkflowID(id)
	_, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       wid,
		TaskQueue:                d.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("replay %d: %d deliveries", id, matched),
	}, workflows.ReplayWorkflow, workflows.ReplayInput{ReplayID: id})
	if err != nil {
		return "", fmt.Errorf("%w: start %s: %w", ErrTemporal, wid, err)
	}
	return wid, nil
}

// CancelReplay cancels the workflow of replay id, whose row the caller has marked canceled: its
// activity stops at its next heartbeat, and before its next delivery in any case (the row). A
// workflow that has ended already is no error.
func (d *Dispatcher) CancelReplay(ctx context.Context, id int64) error {
	wid := workflows.ReplayWorkflowID(id)
	err := d.Client.CancelWorkflow(ctx, wid, "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("%w: cancel %s: %w", ErrTemporal, wid, err)
	}
	return nil
}

// replayBatch is how many of a replay's deliveries ReplayDeliveries reads at a time.
const replayBatch = 100

// ReplayDeliveries sends again the deliveries of replay in.ReplayID, in id order, from after the
// last one its row says it handled, and returns how many it has sent in all. Each delivery is
// claimed from the replay's states and the replay's progress recorded in one transaction
// (model.AdvanceReplay), then handed to its workflow and the claim released: a replay run again
// after a crash starts after that delivery, so it never claims one twice, and a claim whose
// hand-over the crash cut short is the sweeper's (Dispatcher.RepairClaims). A delivery no longer
// in those states (sent since by another retry, or claimed by one right now) is skipped. The
// replay ends done; canceled meanwhile (its row), the activity stops before its next delivery.
func (a *Activities) ReplayDeliveries(ctx context.Context, in workflows.ReplayInput) (int, error) {
	r, err := model.GetReplay(ctx, a.DB, nil, in.ReplayID)
	if err != nil {
		return 0, err
	}
	c, err := r.ReadCriteria()
	if err != nil {
		return int(r.Sent), err
	}
	states := c.States
	// As a recovery: a delivery with an attempt in flight is retried only if that attempt fails, so
	// that it is not sent twice; a delivered one (states naming delivered) has no workflow running
	// and gets a new run, a resend.
	ctx = context.WithValue(ctx, unlessDeliveredKey{}, true)
	sent, after := int(r.Sent), r.After
	for r.State == model.ReplayRunning {
		ids, err := model.ReplayItems(ctx, a.DB, r.ID, after, replayBatch)
		if err != nil {
			return sent, err
		}
		if len(ids) == 0 {
			_, err := model.EndReplay(ctx, a.DB, nil, r.ID, model.ReplayDone)
			if err == nil {
				activity.GetLogger(ctx).Info("replay done", "replay", r.ID, "sent", sent)
			}
			return sent, err
		}
		refs, err := deliveryRefs(ctx, a.DB, model.DeliveryQuery{DeliveryIDs: ids})
		if err != nil {
			return sent, err
		}
		byID := make(map[int64]model.DeliveryRef, len(refs))
		for _, ref := range refs {
			byID[ref.DeliveryID] = ref
		}
		for _, id := range ids {
			ref, found := byID[id]
			var ok, running bool
			if found {
				ok, running, err = a.Dispatcher.replayOne(ctx, a.DB, r.ID, after, ref, states)
			} else {
				// Purged by retention meanwhile: skipped.
				running, err = a.advance(ctx, r.ID, id)
			}
			if err != nil {
				return sent, err
			}
			if !running {
				activity.GetLogger(ctx).Info("replay canceled", "replay", r.ID, "sent", sent)
				return sent, nil
			}
			if ok {
				sent++
			}
			after = id
			activity.RecordHeartbeat(ctx, after)
		}
	}
	return sent, nil
}

// advance records a replay's item skipped; false when the replay no longer runs.
func (a *Activities) advance(ctx context.Context, id, deliveryID int64) (bool, error) {
	ok, err := model.AdvanceReplay(ctx, a.DB, id, deliveryID, false)
	if err != nil || ok {
		return ok, err
	}
	r, err := model.GetReplay(ctx, a.DB, nil, id)
	if err != nil {
		return false, err
	}
	return r.State == model.ReplayRunning, nil
}

// errReplayEnded rolls back the claim of a delivery whose replay was canceled meanwhile.
var errReplayEnded = errors.New("the replay has ended")

// replayOne hands one delivery of replay id over (r; after is the replay's cursor before it) if it
// is still in one of states, as a recovery does: one with an attempt in flight gets a signal, one
// whose schedule has ended is claimed and its workflow signaled or run again. The claim and the
// replay's progress are one transaction. It reports whether it sent the delivery, and whether
// the replay still runs.
func (d *Dispatcher) replayOne(ctx context.Context, db *bun.DB, id, after int64, r model.DeliveryRef, states []string) (sent, running bool, err error) {
	if slices.Contains(model.InFlightStates, r.State) && slices.Contains(states, r.State) {
		// No claim (the workflow runs): the progress is recorded first, as for a claim, so that a
		// canceled replay signals nothing more; a signal that fails takes it back.
		ok, err := model.AdvanceReplay(ctx, db, id, r.DeliveryID, true)
		if err != nil || !ok {
			return false, ok, err
		}
		if _, err := d.retryInFlight(ctx, db, r); err != nil {
			return false, true, errors.Join(err, model.UndoAdvance(context.WithoutCancel(ctx), db, id, r.DeliveryID, after))
		}
		return true, true, nil
	}

	var claimed bool
	var at = model.Now()
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		if at, claimed, err = model.ClaimDelivery(ctx, tx, r.DeliveryID, states); err != nil {
			return err
		}
		ok, err := model.AdvanceReplay(ctx, tx, id, r.DeliveryID, claimed)
		if err != nil {
			return err
		}
		if !ok {
			return errReplayEnded
		}
		return nil
	})
	switch {
	case errors.Is(err, errReplayEnded):
		return false, false, nil
	case err != nil:
		return false, true, err
	case !claimed:
		return false, true, nil
	}
	if err := d.handOver(ctx, db, r); err != nil {
		err = fmt.Errorf("%w: %w", ErrTemporal, err)
		// Give the delivery its state back and the replay its cursor, so that the activity, run
		// again, tries it again; should this fail, the claim is the sweeper's to hand over.
		undo := db.RunInTx(context.WithoutCancel(ctx), nil, func(ctx context.Context, tx bun.Tx) error {
			if err := model.RestoreClaim(ctx, tx, r, at); err != nil {
				return err
			}
			return model.UndoAdvance(ctx, tx, id, r.DeliveryID, after)
		})
		return false, true, errors.Join(err, undo)
	}
	// A release that fails leaves the claim to the sweeper: one more signal, at worst.
	return true, true, model.ReleaseClaim(context.WithoutCancel(ctx), db, r.DeliveryID, at)
}
