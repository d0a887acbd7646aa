package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Activities are the activities through which workflows start and retry delivery workflows
// (FanOutWorkflow, RecoverWorkflow, RetryWebhookWorkflow, WebsitePublishWorkflow). The workflows
// call them by registered name (workflows.Activity*), since this package imports theirs; the
// method names are those names, which TestActivityNamesMatchWorkflows checks.
type Activities struct {
	DB         *bun.DB
	Dispatcher *Dispatcher
}

// fanOutBatch is how many delivery workflows StartDeliveries starts between two heartbeats.
const fanOutBatch = 100

// StartDeliveries starts the delivery workflows of in.EventID, fanOutBatch at a time. They are
// recorded dispatched already: StartEvent did when it started this workflow. Its heartbeat carries
// how many it has started, so a retry skips those.
func (a *Activities) StartDeliveries(ctx context.Context, in workflows.FanOutInput) error {
	refs, err := deliveryRefs(ctx, a.DB, model.DeliveryQuery{EventID: in.EventID})
	if err != nil {
		return err
	}
	done := 0
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &done)
	}
	for done < len(refs) {
		batch := refs[done:min(done+fanOutBatch, len(refs))]
		if _, err := a.Dispatcher.start(ctx, batch, StartedByFanOut); err != nil {
			return err
		}
		done += len(batch)
		activity.RecordHeartbeat(ctx, done)
	}
	activity.GetLogger(ctx).Info("fan-out started", "event", in.EventID, "deliveries", len(refs))
	return nil
}

// StartEventDeliveries starts the delivery workflows of an event that a workflow emitted (a
// website's scheduled publication) and records them dispatched. The sweeper would start them too;
// starting them now saves its interval.
func (a *Activities) StartEventDeliveries(ctx context.Context, eventID int64) error {
	refs, err := deliveryRefs(ctx, a.DB, model.DeliveryQuery{EventID: eventID})
	if err != nil {
		return err
	}
	return a.Dispatcher.Start(ctx, a.DB, refs, StartedByActivity)
}

// retryBatch is how many deliveries a batch retry (RecoverDeliveries, RetryExhausted) reads at a
// time.
const retryBatch = 100

// RecoverDeliveries retries the deliveries of a recovery that still have not succeeded, in id
// order, and returns how many it retried. Its signals ask for an attempt only if the delivery has
// not been delivered: one with an attempt in flight is retried if that attempt fails.
func (a *Activities) RecoverDeliveries(ctx context.Context, in workflows.RecoverInput) (int, error) {
	ctx = context.WithValue(ctx, unlessDeliveredKey{}, true)
	r := model.Recovery{WebhookID: in.WebhookID, Since: in.Since, Until: in.Until, UpTo: in.UpTo}
	retried, err := a.retryInBatches(ctx, model.RecoverableStates, r.Query())
	if err == nil {
		activity.GetLogger(ctx).Info("recovery done", "webhook", in.WebhookID, "retried", retried)
	}
	return retried, err
}

// RetryExhausted retries the deliveries of a webhook-wide retry that are still exhausted, in id
// order, and returns how many it retried.
func (a *Activities) RetryExhausted(ctx context.Context, in workflows.RetryWebhookInput) (int, error) {
	if in.UpTo < 1 {
		return 0, nil // a retry of none: UpTo bounds the ids, and no id is below 1
	}
	retried, err := a.retryInBatches(ctx, model.RetriableStates, exhausted(in.WebhookID, in.UpTo))
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

// exhausted is the read of a webhook's exhausted deliveries, up to upTo when it is set: what a
// webhook-wide retry counts, then retries.
func exhausted(webhookID, upTo int64) model.DeliveryQuery {
	return model.DeliveryQuery{WebhookID: webhookID, States: []string{model.DeliveryExhausted}, UpTo: upTo}
}

// retryInBatches retries the deliveries q selects, retryBatch at a time in id order, claiming
// each from the states from, and returns how many it retried. It heartbeats after each delivery,
// so that when it runs again (its worker died) it resumes after the last one done; one it had
// claimed and not handed over is the sweeper's (Dispatcher.RepairClaims).
func (a *Activities) retryInBatches(ctx context.Context, from []string, q model.DeliveryQuery) (int, error) {
	var p batchProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p)
	}
	for {
		q.After, q.Limit = p.After, retryBatch
		refs, err := deliveryRefs(ctx, a.DB, q)
		if err != nil || len(refs) == 0 {
			return p.Retried, err
		}
		for _, r := range refs {
			var retried []int64
			if slices.Contains(model.InFlightStates, r.State) && slices.Contains(from, r.State) {
				retried, err = a.Dispatcher.retryInFlight(ctx, a.DB, r)
			} else {
				retried, err = a.Dispatcher.retryClaimed(ctx, a.DB, []model.DeliveryRef{r}, from)
			}
			p.Retried += len(retried)
			if err != nil {
				return p.Retried, err
			}
			p.After = r.DeliveryID
			activity.RecordHeartbeat(ctx, p)
		}
	}
}

// NextInLane records how far a lane's workflow got and returns the lane's next deliveries, in
// order (workflows.LaneWorkflow).
func (a *Activities) NextInLane(ctx context.Context, in workflows.NextInLaneInput) (workflows.LaneBatch, error) {
	work, done, err := model.NextInLane(ctx, a.DB, in.LaneID, in.Done, workflows.LaneBatchSize)
	return workflows.LaneBatch{Work: work, Done: done}, err
}

// errNotDone fails AwaitDone, so that Temporal retries it, while the delivery is not done.
var errNotDone = errors.New("the delivery is not done yet; the lane waits for it")

// AwaitDone returns once a lane's delivery is done as its lane counts it (delivered, or canceled),
// and fails until then: its lane waits on it, retrying with the activity's backoff
// (workflows.runInLane).
func (a *Activities) AwaitDone(ctx context.Context, deliveryID int64) error {
	done, err := model.DeliveryDone(ctx, a.DB, deliveryID)
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("delivery %d: %w", deliveryID, errNotDone)
	}
	return nil
}
