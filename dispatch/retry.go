package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Manual retries: the operations behind the API's retry, resend and recover calls, the portal's
// and the `webhookd webhooks` commands, so that all do the same thing.

// RetryWebhook is a manual retry of a webhook, in the background: it enables the webhook if it was
// disabled, counts its exhausted deliveries, starts a RetryWebhookWorkflow that runs the schedule of
// each of them again, and returns the count and the workflow's id at once (0 and "" when none is
// exhausted: no workflow). Asked twice while the first runs, it finds the same workflow as long as
// the largest exhausted delivery id is the same.
func (d *Dispatcher) RetryWebhook(ctx context.Context, db bun.IDB, webhookID int64) (int, string, error) {
	// Enabled before the signals: a retried attempt that still found the webhook disabled would
	// be held again instead of delivered.
	if err := model.ReenableWebhook(ctx, db, webhookID); err != nil {
		return 0, "", err
	}
	n, upTo, err := model.CountDeliveries(ctx, db, exhausted(webhookID, 0))
	if err != nil || n == 0 {
		return 0, "", err
	}
	in := workflows.RetryWebhookInput{WebhookID: webhookID, UpTo: upTo}
	id := workflows.RetryWebhookWorkflowID(in)
	_, err = d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                d.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("retry webhook %d: %d exhausted deliveries", webhookID, n),
	}, workflows.RetryWebhookWorkflow, in)
	if err != nil {
		return 0, "", fmt.Errorf("%w: start %s: %w", ErrTemporal, id, err)
	}
	return n, id, nil
}

// Resend sends one delivery of a webhook again, whatever its state, and enables the webhook
// if it was disabled. A delivery still in its schedule makes its next attempt now. One that has
// ended, exhausted or delivered, runs again under the same workflow id, its attempts numbered on:
// a delivered one is sent once more with the same webhook-id, so its receiver can recognize it. A
// resend that finds another one handing the delivery over right then joins it.
// model.ErrNotFound means the webhook has no such delivery; ErrCanceled, that it was canceled.
func (d *Dispatcher) Resend(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (model.DeliveryRef, error) {
	if _, ok := ctx.Value(askedAtKey{}).(time.Time); !ok {
		ctx = WithAskedAt(ctx, model.Now())
	}
	ref, err := model.WebhookDeliveryRef(ctx, db, webhookID, deliveryID)
	if err != nil {
		return ref, err
	}
	if ref.State == model.DeliveryCanceled {
		return ref, ErrCanceled
	}
	if err := model.ReenableWebhook(ctx, db, webhookID); err != nil {
		return ref, err
	}
	if ref.State == model.DeliveryDelivering {
		return ref, d.joinResend(ctx, ref)
	}
	_, err = d.retryClaimed(ctx, db, []model.DeliveryRef{ref}, model.ResendableStates)
	return ref, err
}

// joinResend is the resend of a delivery that is delivering: another retry has claimed it and is
// handing it to its workflow, or an attempt is in flight. It joins that retry: it signals the
// workflow if it runs, which takes every signal waiting as one (workflows.takeRetries) and those that come
// during an attempt as one more after it, and it never starts a run, which would be a second
// attempt (50 concurrent resends of one delivery made 51 attempts, issue 18). A run not started
// yet is the claim's to start; one a crash left unstarted, the sweeper's.
func (d *Dispatcher) joinResend(ctx context.Context, r model.DeliveryRef) error {
	id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
	err := d.Client.SignalWorkflow(ctx, id, "", workflows.SignalRetry, retrySignal(ctx))
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("%w: retry %s: %w", ErrTemporal, id, err)
	}
	return nil
}

// askedAtKey holds, in a resend's context, when the resend was asked for (retrySignal).
type askedAtKey struct{}

// WithAskedAt tells Resend when its request came in: the API's is the time the request
// arrived, before it waited for anything (the database, Temporal); without it, the time of the call.
func WithAskedAt(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, askedAtKey{}, t)
}

// unlessDeliveredKey marks a recovery's context: its signals ask for an attempt only if the
// delivery has not been delivered (retrySignal).
type unlessDeliveredKey struct{}

// retrySignal is the payload of the retry signal sent under ctx: a RetryRequest saying when a
// resend was asked for, so that the workflow drops the signal if an attempt has started since
// (takeRetries), or that a recovery asks only for a delivery that has not succeeded; nil for the
// other retries, which ask for an attempt whenever they come.
func retrySignal(ctx context.Context) any {
	if t, ok := ctx.Value(askedAtKey{}).(time.Time); ok {
		return workflows.RetryRequest{AskedAt: t}
	}
	if ctx.Value(unlessDeliveredKey{}) != nil {
		return workflows.RetryRequest{UnlessDelivered: true}
	}
	return nil
}

// retryInFlight is a recovery's retry of a delivery that may have an attempt in flight
// (model.InFlightStates): its first (pending), or a later one, its last perhaps, before its
// workflow marks it exhausted (delivering); or another retry is handing it to its workflow. The
// running workflow gets a signal that asks for an attempt only if the delivery has not been
// delivered (workflows.RetryRequest.UnlessDelivered): taken after an attempt that fails, it brings
// the next forward, or runs the schedule again if none was left; after one that delivers, it asks
// for nothing. Nothing is claimed, since the workflow runs: a recovery that dies before the signal
// resumes from its heartbeat and signals again, and signals that wait together are one retry. A
// workflow that has ended since leaves the delivery to the claim of the states it may have ended
// in; a pending one whose workflow has not started yet makes its attempts when the sweeper starts
// it. ctx is a recovery's (RecoverDeliveries marks it), so its signals ask only for a delivery that
// has not succeeded. It returns the ids it retried.
func (d *Dispatcher) retryInFlight(ctx context.Context, db bun.IDB, r model.DeliveryRef) ([]int64, error) {
	id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
	err := d.Client.SignalWorkflow(ctx, id, "", workflows.SignalRetry, retrySignal(ctx))
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return d.retryClaimed(ctx, db, []model.DeliveryRef{r}, []string{model.DeliveryExhausted, model.DeliveryRetrying})
	case err != nil:
		return nil, fmt.Errorf("%w: retry %s: %w", ErrTemporal, id, err)
	}
	return []int64{r.DeliveryID}, nil
}

var (
	// ErrCanceled refuses to retry a canceled delivery: its webhook was deleted.
	ErrCanceled = errors.New("the delivery was canceled")
	// ErrTemporal wraps a failure to reach Temporal, the retry's own, as against the database's.
	ErrTemporal = errors.New("temporal")
)

// retryClaimed retries refs, one at a time, and returns the ids it retried. Each delivery is
// claimed (model.ClaimDelivery, from one of the states from) right before its workflow is signaled
// or run again, and the claim is released right after: a crash between the two leaves one
// delivery claimed, which the worker's sweeper hands over again (RepairClaims), and never a
// batch of deliveries marked delivering with no workflow told. A delivery another retry holds, or
// that has moved out of from since refs were read, is skipped. At the first error from Temporal
// the delivery gets its state back and the retry stops.
func (d *Dispatcher) retryClaimed(ctx context.Context, db bun.IDB, refs []model.DeliveryRef, from []string) ([]int64, error) {
	retried := make([]int64, 0, len(refs))
	var err error
	for _, r := range refs {
		var at time.Time
		var ok bool
		if at, ok, err = model.ClaimDelivery(ctx, db, r.DeliveryID, from); err != nil {
			break
		}
		if !ok {
			continue
		}
		if err = d.handOver(ctx, db, r); err != nil {
			err = fmt.Errorf("%w: %w", ErrTemporal, err)
			if rerr := model.RestoreClaim(context.WithoutCancel(ctx), db, r, at); rerr != nil {
				err = errors.Join(err, rerr)
			}
			break
		}
		retried = append(retried, r.DeliveryID)
		// A release that fails leaves the claim to the sweeper: one more signal, at worst.
		if err = model.ReleaseClaim(context.WithoutCancel(ctx), db, r.DeliveryID, at); err != nil {
			break
		}
	}
	// A pending delivery retried before its first start now has its workflow: the sweeper must not
	// count it as one it started.
	if merr := model.MarkDispatched(context.WithoutCancel(ctx), db, retried); merr != nil {
		err = errors.Join(err, merr)
	}
	return retried, err
}

// Recover retries every delivery of r's webhook that did not succeed in r's window, in the
// background: it counts them, starts a RecoverWorkflow for them and answers at once. r.Until zero
// means "until now": now, the time of the request that starts the recovery. The webhook is enabled
// first, as for any manual retry.
//
// Identical requests (the same webhook, since and until as given) agree: while one recovery runs,
// another request joins it and answers its workflow id, count and cut-off, read back from the
// workflow's memo, not a count of its own, which would shrink as the recovery claims deliveries.
// Once it has ended, the next identical request starts a new one and counts afresh. A request
// that finds nothing to recover and no recovery of its own running answers 0 and no workflow.
func (d *Dispatcher) Recover(ctx context.Context, db bun.IDB, r model.Recovery, now time.Time) (Recovering, error) {
	id := workflows.RecoverWorkflowID(r.WebhookID, r.Since, r.Until)
	if r.Until.IsZero() {
		r.Until = now
	}
	if err := model.ReenableWebhook(ctx, db, r.WebhookID); err != nil {
		return Recovering{}, err
	}
	n, upTo, err := model.CountDeliveries(ctx, db, r.Query())
	if err != nil {
		return Recovering{}, err
	}
	mine := Recovering{WorkflowID: id, Queued: n, Until: r.Until, UpTo: upTo}
	if n == 0 {
		// Perhaps because a recovery of the same request has claimed them all: answer as it did.
		return d.runningRecovery(ctx, id, Recovering{Until: r.Until})
	}
	in := workflows.RecoverInput{WebhookID: r.WebhookID, Since: r.Since, Until: r.Until, UpTo: upTo}
	run, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                d.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("recover webhook %d: %d deliveries", r.WebhookID, n),
		Memo:                     map[string]any{recoveringMemo: mine},
	}, workflows.RecoverWorkflow, in)
	if err != nil {
		return Recovering{}, fmt.Errorf("%w: start %s: %w", ErrTemporal, id, err)
	}
	// The run may be another request's (USE_EXISTING returns it): its memo has the answer.
	got, found, err := d.recoveringMemo(ctx, id, run.GetRunID())
	if err != nil || !found {
		return mine, err // !found: a run started without the memo
	}
	return got, nil
}

// Recovering is Recover's answer: the recovery's workflow, how many deliveries it retries, and
// the window's end (until as given, or the time of the request that started it) and largest
// delivery id, which bound it.
type Recovering struct {
	// WorkflowID is empty when there was nothing to recover and no identical recovery runs.
	WorkflowID string
	Queued     int
	Until      time.Time
	UpTo       int64
}

// recoveringMemo is the memo field of a RecoverWorkflow that holds its Recovering.
const recoveringMemo = "recovering"

// runningRecovery answers for a request that found nothing to recover: the running recovery id,
// if there is one, else none.
func (d *Dispatcher) runningRecovery(ctx context.Context, id string, none Recovering) (Recovering, error) {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return none, nil
	case err != nil:
		return Recovering{}, fmt.Errorf("%w: describe %s: %w", ErrTemporal, id, err)
	case desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return none, nil
	}
	got, found, err := d.recoveringMemo(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	if err != nil || !found {
		return none, err
	}
	return got, nil
}

// recoveringMemo reads the Recovering of a recovery's run from its memo.
func (d *Dispatcher) recoveringMemo(ctx context.Context, id, runID string) (Recovering, bool, error) {
	desc, err := d.Client.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return Recovering{}, false, fmt.Errorf("%w: describe %s: %w", ErrTemporal, id, err)
	}
	p, ok := desc.GetWorkflowExecutionInfo().GetMemo().GetFields()[recoveringMemo]
	if !ok {
		return Recovering{}, false, nil
	}
	var got Recovering
	if err := converter.GetDefaultDataConverter().FromPayload(p, &got); err != nil {
		return Recovering{}, false, fmt.Errorf("read the memo of %s: %w", id, err)
	}
	got.WorkflowID = id
	return got, true, nil
}

// handOver signals the workflow of one delivery, or runs it again if it has ended.
func (d *Dispatcher) handOver(ctx context.Context, db bun.IDB, r model.DeliveryRef) error {
	id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
	err := d.Client.SignalWorkflow(ctx, id, "", workflows.SignalRetry, retrySignal(ctx))
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && r.LaneID != 0 && r.Attempts == 0 {
		// An ordered webhook's delivery that no run has attempted: unless it is its lane's head, the
		// lane has not reached it, and it is made in its turn. A run of its own would pass the
		// deliveries before it (docs/ordering.md); the lane's head is started, should it not run
		// (a start lost). The head itself gets a new run below.
		heads, herr := model.LaneHeadRefs(ctx, db, []int64{r.LaneID})
		if herr != nil {
			return herr
		}
		if len(heads) == 0 || heads[0].DeliveryID != r.DeliveryID {
			_, serr := d.start(ctx, heads, StartedByRepair)
			return serr
		}
	}
	if errors.As(err, &nf) {
		// Not SignalWithStart: a new run must not find a retry signal waiting, which would cut
		// short its first scheduled wait.
		opts := d.searchableStartOptions(r)
		opts.WorkflowIDReusePolicy = enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		in := d.input(r, r.Attempts)
		in.Resend = r.State == model.DeliveryDelivered
		_, err = d.Client.ExecuteWorkflow(ctx, opts, workflows.DeliveryWorkflow, in)
		if isAlreadyStarted(err) {
			err = nil // a concurrent retry started it first
		}
	}
	if err != nil {
		return fmt.Errorf("retry %s: %w", id, err)
	}
	return nil
}

// RepairClaims hands to their workflows the deliveries that a manual retry claimed before
// olderThan and never released: its process died between the claim and the signal or start (or
// right after it, before the release). Each is handed over as a resend is, the running workflow
// signaled or a new run started under the same id with its attempts numbered on, and its claim is
// cleared. A claim whose signal had in fact landed gets a second one: at worst one more POST, with
// the same webhook-id (at least once, never lost). A delivery whose state shows that its
// workflow has run since (delivered, exhausted or canceled) only loses the claim. It returns how
// many it handed over, counted under StartedByRepair.
func (d *Dispatcher) RepairClaims(ctx context.Context, db bun.IDB, olderThan time.Time) (int, error) {
	total := 0
	for {
		refs, err := model.StaleClaims(ctx, db, olderThan, 200)
		if err != nil || len(refs) == 0 {
			return total, err
		}
		handed := make([]int64, 0, len(refs))
		for _, r := range refs {
			var again bool
			if again, err = d.repairClaim(ctx, db, r); err != nil {
				break
			}
			if again {
				handed = append(handed, r.DeliveryID)
			}
		}
		total += len(handed)
		if d.Starts != nil {
			d.Starts.WithLabelValues(string(StartedByRepair)).Add(float64(len(handed)))
		}
		if merr := model.MarkDispatched(context.WithoutCancel(ctx), db, handed); merr != nil {
			err = errors.Join(err, merr)
		}
		if err != nil {
			return total, err
		}
	}
}

// repairClaim hands one stale claim's delivery to its workflow, unless its state shows the
// workflow ran since, and clears the claim. It reports whether it handed the delivery over.
func (d *Dispatcher) repairClaim(ctx context.Context, db bun.IDB, r model.ClaimedRef) (bool, error) {
	again := !slices.Contains(model.EndedStates, r.State)
	if again {
		if err := d.handOver(ctx, db, r.DeliveryRef); err != nil {
			return false, err
		}
	}
	return again, model.ReleaseClaim(ctx, db, r.DeliveryID, r.ClaimedAt)
}
