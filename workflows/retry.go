package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/model"
)

// Manual retries: the operations behind the API's retry, resend and recover calls and the
// `webhookd webhooks` commands, so that both do the same thing.

// RetryWebhook is a manual retry of a webhook: it enables the webhook if it was disabled, then runs
// the schedule of each of its exhausted deliveries again. It returns how many it retried; on an
// error, those it had retried before it.
func (s *Starter) RetryWebhook(ctx context.Context, db bun.IDB, webhookID int64) (int, error) {
	// Enabled before the signals: a retried attempt that still found the webhook disabled would
	// be held again instead of delivered.
	if err := model.ReenableWebhook(ctx, db, webhookID); err != nil {
		return 0, err
	}
	refs, err := model.ExhaustedDeliveries(ctx, db, webhookID)
	if err != nil {
		return 0, err
	}
	retried, err := s.retryDeliveries(ctx, db, refs)
	return len(retried), err
}

// RetryDelivery sends one delivery of a webhook again, whatever its state, and enables the webhook
// if it was disabled. A delivery still in its schedule makes its next attempt now. One that has
// ended, exhausted or delivered, runs again under the same workflow id, its attempts numbered on:
// a delivered one is sent once more with the same webhook-id, so its receiver can recognize it.
// model.ErrNotFound means the webhook has no such delivery; ErrCanceled, that it was canceled.
func (s *Starter) RetryDelivery(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (model.DeliveryRef, error) {
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
	_, err = s.retryDeliveries(ctx, db, []model.DeliveryRef{ref})
	return ref, err
}

var (
	// ErrCanceled refuses to retry a canceled delivery: its webhook was deleted.
	ErrCanceled = errors.New("the delivery was canceled")
	// ErrTemporal wraps a failure to reach Temporal, the retry's own, as against the database's.
	ErrTemporal = errors.New("temporal")
)

// retryDeliveries retries refs and returns the ids it retried. Deliveries that had ended are
// claimed (moved to delivering) before their workflows are signaled or run again, not after: an
// attempt that finishes first must not have its outcome overwritten. Those it could not retry get
// their state back.
func (s *Starter) retryDeliveries(ctx context.Context, db bun.IDB, refs []model.DeliveryRef) ([]int64, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.DeliveryID
	}
	if err := model.ClaimForRetry(ctx, db, ids); err != nil {
		return nil, err
	}
	retried, err := s.Retry(ctx, refs)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrTemporal, err)
		if rerr := model.RestoreStates(context.WithoutCancel(ctx), db, refs[len(retried):]); rerr != nil {
			err = errors.Join(err, rerr)
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
// background: it counts them, starts a RecoverWorkflow for them and returns the count at once. The
// webhook is enabled first, as for any manual retry. A recovery asked for twice while the first
// still runs is the same workflow.
func (s *Starter) Recover(ctx context.Context, db bun.IDB, r model.Recovery) (int, error) {
	if err := model.ReenableWebhook(ctx, db, r.WebhookID); err != nil {
		return 0, err
	}
	n, upTo, err := model.CountRecoverable(ctx, db, r)
	if err != nil || n == 0 {
		return 0, err
	}
	in := RecoverInput{WebhookID: r.WebhookID, Since: r.Since, Until: r.Until, UpTo: upTo}
	_, err = s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       RecoverWorkflowID(in),
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("recover webhook %d: %d deliveries", r.WebhookID, n),
	}, RecoverWorkflow, in)
	if err != nil {
		return 0, fmt.Errorf("%w: start %s: %w", ErrTemporal, RecoverWorkflowID(in), err)
	}
	return n, nil
}

// RecoverInput starts a RecoverWorkflow: the webhook, the window, and the largest delivery id the
// recovery covers.
type RecoverInput struct {
	WebhookID    int64
	Since, Until time.Time
	UpTo         int64
}

// RecoverWorkflowID names a recovery by what it covers, so that asking twice finds the first.
func RecoverWorkflowID(in RecoverInput) string {
	return fmt.Sprintf("recover:%d:%d-%d:%d", in.WebhookID, in.Since.UnixMilli(), in.Until.UnixMilli(), in.UpTo)
}

// recoverBatch is how many deliveries RecoverDeliveries retries between two heartbeats.
const recoverBatch = 100

// RecoverWorkflow retries the deliveries of a recovery, a batch at a time, in one activity that
// resumes after a crash where its heartbeat says it stopped.
func RecoverWorkflow(ctx workflow.Context, in RecoverInput) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    time.Minute,
		// Temporal or the database away: keep trying; retrying a delivery twice is harmless.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:     fmt.Sprintf("retry the failed deliveries of webhook %d up to delivery %d", in.WebhookID, in.UpTo),
	})
	var d *DispatchActivities
	var retried int
	err := workflow.ExecuteActivity(ctx, d.RecoverDeliveries, in).Get(ctx, &retried)
	return retried, err
}

// recoverProgress is RecoverDeliveries' heartbeat: the last delivery id done, and how many it
// retried.
type recoverProgress struct {
	After   int64
	Retried int
}

// RecoverDeliveries retries the deliveries of a recovery that still have not succeeded, in id
// order, recoverBatch at a time, and returns how many it retried.
func (f *DispatchActivities) RecoverDeliveries(ctx context.Context, in RecoverInput) (int, error) {
	r := model.Recovery{WebhookID: in.WebhookID, Since: in.Since, Until: in.Until, UpTo: in.UpTo}
	var p recoverProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p)
	}
	for {
		refs, err := model.RecoverableDeliveries(ctx, f.DB, r, p.After, recoverBatch)
		if err != nil {
			return p.Retried, err
		}
		if len(refs) == 0 {
			break
		}
		retried, err := f.Starter.retryDeliveries(ctx, f.DB, refs)
		if err != nil {
			return p.Retried, err
		}
		p.After, p.Retried = refs[len(refs)-1].DeliveryID, p.Retried+len(retried)
		activity.RecordHeartbeat(ctx, p)
	}
	activity.GetLogger(ctx).Info("recovery done", "webhook", in.WebhookID, "retried", p.Retried)
	return p.Retried, nil
}
