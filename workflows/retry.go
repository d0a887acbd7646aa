package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/model"
)

// Manual retries: the operations behind the API's retry, resend and recover calls and the
// `webhookd webhooks` commands, so that both do the same thing.

// RetryWebhook is a manual retry of a webhook, in the background: it enables the webhook if it was
// disabled, counts its exhausted deliveries, starts a RetryWebhookWorkflow that runs the schedule of
// each of them again, and returns the count and the workflow's id at once (0 and "" when none is
// exhausted: no workflow). Asked twice while the first runs, it finds the same workflow as long as
// the largest exhausted delivery id is the same.
func (s *Starter) RetryWebhook(ctx context.Context, db bun.IDB, webhookID int64) (int, string, error) {
	// Enabled before the signals: a retried attempt that still found the webhook disabled would
	// be held again instead of delivered.
	if err := model.ReenableWebhook(ctx, db, webhookID); err != nil {
		return 0, "", err
	}
	n, upTo, err := model.CountExhausted(ctx, db, webhookID)
	if err != nil || n == 0 {
		return 0, "", err
	}
	in := RetryWebhookInput{WebhookID: webhookID, UpTo: upTo}
	id := RetryWebhookWorkflowID(in)
	_, err = s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("retry webhook %d: %d exhausted deliveries", webhookID, n),
	}, RetryWebhookWorkflow, in)
	if err != nil {
		return 0, "", fmt.Errorf("%w: start %s: %w", ErrTemporal, id, err)
	}
	return n, id, nil
}

// RetryDelivery sends one delivery of a webhook again, whatever its state, and enables the webhook
// if it was disabled. A delivery still in its schedule makes its next attempt now. One that has
// ended, exhausted or delivered, runs again under the same workflow id, its attempts numbered on:
// a delivered one is sent once more with the same webhook-id, so its receiver can recognize it. A
// resend that finds another one handing the delivery over right then joins it.
// model.ErrNotFound means the webhook has no such delivery; ErrCanceled, that it was canceled.
func (s *Starter) RetryDelivery(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (model.DeliveryRef, error) {
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
		return ref, s.joinResend(ctx, ref)
	}
	_, err = s.retryDeliveries(ctx, db, []model.DeliveryRef{ref}, resendableStates)
	return ref, err
}

// resendableStates are the states a resend claims a delivery from: all but canceled.
var resendableStates = []string{model.DeliveryPending, model.DeliveryDelivering, model.DeliveryRetrying, model.DeliveryDelivered, model.DeliveryExhausted}

// joinResend is the resend of a delivery that is delivering: another retry has claimed it and is
// handing it to its workflow, or an attempt is in flight. It joins that retry: it signals the
// workflow if it runs, which takes every signal waiting as one (drainRetries) and those that come
// during an attempt as one more after it, and it never starts a run, which would be a second
// attempt (50 concurrent resends of one delivery made 51 attempts, issue 18). A run not started
// yet is the claim's to start; one a crash left unstarted, the sweeper's.
func (s *Starter) joinResend(ctx context.Context, r model.DeliveryRef) error {
	id := DeliveryWorkflowID(r.EventID, r.WebhookID)
	err := s.Client.SignalWorkflow(ctx, id, "", SignalRetry, retrySignal(ctx))
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("%w: retry %s: %w", ErrTemporal, id, err)
	}
	return nil
}

// askedAtKey holds, in a resend's context, when the resend was asked for (retrySignal).
type askedAtKey struct{}

// WithAskedAt tells RetryDelivery when its request came in: the API's is the time the request
// arrived, before it waited for anything (the database, Temporal); without it, the time of the call.
func WithAskedAt(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, askedAtKey{}, t)
}

// retrySignal is the payload of the retry signal sent under ctx: a RetryRequest saying when a
// resend was asked for, so that the workflow drops the signal if an attempt has started since
// (takeRetries); nil for the other retries, which ask for an attempt whenever they come.
func retrySignal(ctx context.Context) any {
	if t, ok := ctx.Value(askedAtKey{}).(time.Time); ok {
		return RetryRequest{AskedAt: t}
	}
	return nil
}

var (
	// ErrCanceled refuses to retry a canceled delivery: its webhook was deleted.
	ErrCanceled = errors.New("the delivery was canceled")
	// ErrTemporal wraps a failure to reach Temporal, the retry's own, as against the database's.
	ErrTemporal = errors.New("temporal")
)

// retryDeliveries retries refs, one at a time, and returns the ids it retried. Each delivery is
// claimed (model.ClaimDelivery, from one of the states from) right before its workflow is signaled
// or run again, and the claim is released right after: a crash between the two leaves one
// delivery claimed, which the worker's sweeper hands over again (RepairClaims), and never a
// batch of deliveries marked delivering with no workflow told. A delivery another retry holds, or
// that has moved out of from since refs were read, is skipped. At the first error from Temporal
// the delivery gets its state back and the retry stops.
func (s *Starter) retryDeliveries(ctx context.Context, db bun.IDB, refs []model.DeliveryRef, from []string) ([]int64, error) {
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
		if err = s.retryOne(ctx, r); err != nil {
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
// means "until now": the time of the request that starts the recovery. The webhook is enabled
// first, as for any manual retry.
//
// Identical requests (the same webhook, since and until as given) agree: while one recovery runs,
// another request joins it and answers its workflow id, count and cut-off, read back from the
// workflow's memo, not a count of its own, which would shrink as the recovery claims deliveries.
// Once it has ended, the next identical request starts a new one and counts afresh. A request
// that finds nothing to recover and no recovery of its own running answers 0 and no workflow.
func (s *Starter) Recover(ctx context.Context, db bun.IDB, r model.Recovery) (Recovering, error) {
	id := RecoverWorkflowID(r.WebhookID, r.Since, r.Until)
	if r.Until.IsZero() {
		r.Until = model.Now()
	}
	if err := model.ReenableWebhook(ctx, db, r.WebhookID); err != nil {
		return Recovering{}, err
	}
	n, upTo, err := model.CountRecoverable(ctx, db, r)
	if err != nil {
		return Recovering{}, err
	}
	mine := Recovering{WorkflowID: id, Queued: n, Until: r.Until, UpTo: upTo}
	if n == 0 {
		// Perhaps because a recovery of the same request has claimed them all: answer as it did.
		return s.runningRecovery(ctx, id, Recovering{Until: r.Until})
	}
	in := RecoverInput{WebhookID: r.WebhookID, Since: r.Since, Until: r.Until, UpTo: upTo}
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("recover webhook %d: %d deliveries", r.WebhookID, n),
		Memo:                     map[string]any{recoveringMemo: mine},
	}, RecoverWorkflow, in)
	if err != nil {
		return Recovering{}, fmt.Errorf("%w: start %s: %w", ErrTemporal, id, err)
	}
	// The run may be another request's (USE_EXISTING returns it): its memo has the answer.
	got, found, err := s.recoveringMemo(ctx, id, run.GetRunID())
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
func (s *Starter) runningRecovery(ctx context.Context, id string, none Recovering) (Recovering, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return none, nil
	case err != nil:
		return Recovering{}, fmt.Errorf("%w: describe %s: %w", ErrTemporal, id, err)
	case desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return none, nil
	}
	got, found, err := s.recoveringMemo(ctx, id, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	if err != nil || !found {
		return none, err
	}
	return got, nil
}

// recoveringMemo reads the Recovering of a recovery's run from its memo.
func (s *Starter) recoveringMemo(ctx context.Context, id, runID string) (Recovering, bool, error) {
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, runID)
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

// RecoverInput starts a RecoverWorkflow: the webhook, the window (its end as a time, also when the
// request left it open), and the largest delivery id the recovery covers.
type RecoverInput struct {
	WebhookID    int64
	Since, Until time.Time
	UpTo         int64
}

// RecoverWorkflowID names a recovery by the request that asks for it: the webhook, since, and
// until as given, or "now" when it was left open. Nothing in it changes as the recovery runs, nor
// with the time of the request, so identical requests find the same workflow while it runs.
func RecoverWorkflowID(webhookID int64, since, until time.Time) string {
	end := "now"
	if !until.IsZero() {
		end = until.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("recover:%d:%s/%s", webhookID, since.UTC().Format(time.RFC3339Nano), end)
}

// retryBatch is how many deliveries a batch retry (RecoverDeliveries, RetryExhausted) reads at a
// time.
const retryBatch = 100

// batchHeartbeatTimeout is how long a batch retry's activity may go without a heartbeat before
// Temporal runs it again, so it is also how soon a batch resumes after its worker died. It beats
// after every delivery (the SDK sends at most one heartbeat per 80% of this), and one delivery is
// two database writes and one Temporal call.
const batchHeartbeatTimeout = 10 * time.Second

// runBatchRetry runs a batch retry's one activity (RecoverDeliveries, RetryExhausted), which
// resumes after a crash where its heartbeat says it stopped, and returns how many it retried.
func runBatchRetry(ctx workflow.Context, summary string, activity, in any) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    batchHeartbeatTimeout,
		// Temporal or the database away: keep trying; retrying a delivery twice is harmless.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:     summary,
	})
	var retried int
	err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &retried)
	return retried, err
}

// RecoverWorkflow retries the deliveries of a recovery, a batch at a time, in one activity that
// resumes after a crash where its heartbeat says it stopped.
func RecoverWorkflow(ctx workflow.Context, in RecoverInput) (int, error) {
	var d *DispatchActivities
	return runBatchRetry(ctx, fmt.Sprintf("retry the failed deliveries of webhook %d up to delivery %d", in.WebhookID, in.UpTo), d.RecoverDeliveries, in)
}

// RecoverDeliveries retries the deliveries of a recovery that still have not succeeded, in id
// order, and returns how many it retried.
func (f *DispatchActivities) RecoverDeliveries(ctx context.Context, in RecoverInput) (int, error) {
	r := model.Recovery{WebhookID: in.WebhookID, Since: in.Since, Until: in.Until, UpTo: in.UpTo}
	retried, err := f.retryInBatches(ctx, model.RecoverableStates, func(ctx context.Context, after int64) ([]model.DeliveryRef, error) {
		return model.RecoverableDeliveries(ctx, f.DB, r, after, retryBatch)
	})
	if err == nil {
		activity.GetLogger(ctx).Info("recovery done", "webhook", in.WebhookID, "retried", retried)
	}
	return retried, err
}

// RetryWebhookInput starts a RetryWebhookWorkflow: the webhook, and the largest id of its
// deliveries that were exhausted when the retry was asked for.
type RetryWebhookInput struct {
	WebhookID int64
	UpTo      int64
}

// RetryWebhookWorkflowID names a webhook-wide retry by what it covers, so that asking twice finds
// the first.
func RetryWebhookWorkflowID(in RetryWebhookInput) string {
	return fmt.Sprintf("retry:%d:%d", in.WebhookID, in.UpTo)
}

// RetryWebhookWorkflow runs the schedule of a webhook's exhausted deliveries again, a batch at a
// time, as RecoverWorkflow does for a recovery.
func RetryWebhookWorkflow(ctx workflow.Context, in RetryWebhookInput) (int, error) {
	var d *DispatchActivities
	return runBatchRetry(ctx, fmt.Sprintf("retry the exhausted deliveries of webhook %d up to delivery %d", in.WebhookID, in.UpTo), d.RetryExhausted, in)
}

// RetryExhausted retries the deliveries of a webhook-wide retry that are still exhausted, in id
// order, and returns how many it retried.
func (f *DispatchActivities) RetryExhausted(ctx context.Context, in RetryWebhookInput) (int, error) {
	retried, err := f.retryInBatches(ctx, []string{model.DeliveryExhausted}, func(ctx context.Context, after int64) ([]model.DeliveryRef, error) {
		return model.ExhaustedDeliveries(ctx, f.DB, in.WebhookID, in.UpTo, after, retryBatch)
	})
	if err == nil {
		activity.GetLogger(ctx).Info("webhook retry done", "webhook", in.WebhookID, "retried", retried)
	}
	return retried, err
}

// batchProgress is a batch retry's heartbeat: the last delivery id done, and how many it retried.
type batchProgress struct {
	After   int64
	Retried int
}

// retryInBatches retries what next selects, retryBatch deliveries at a time in id order, claiming
// each from the states from, and returns how many it retried. It heartbeats after each delivery,
// so that when it runs again (its worker died) it resumes after the last one done; one it had
// claimed and not handed over is the sweeper's (Starter.RepairClaims).
func (f *DispatchActivities) retryInBatches(ctx context.Context, from []string, next func(ctx context.Context, after int64) ([]model.DeliveryRef, error)) (int, error) {
	var p batchProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p)
	}
	for {
		refs, err := next(ctx, p.After)
		if err != nil || len(refs) == 0 {
			return p.Retried, err
		}
		for _, r := range refs {
			retried, err := f.Starter.retryDeliveries(ctx, f.DB, []model.DeliveryRef{r}, from)
			p.Retried += len(retried)
			if err != nil {
				return p.Retried, err
			}
			p.After = r.DeliveryID
			activity.RecordHeartbeat(ctx, p)
		}
	}
}
