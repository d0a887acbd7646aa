package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
)

// SendTest publishes a webhook.test event to w alone, in its variant's body, and returns it with
// its one delivery. A webhook deleted meanwhile is ErrNotFound.
func (s *Service) SendTest(ctx context.Context, w *model.Webhook) (*model.PublishResult, error) {
	res, err := s.Publish(ctx, model.WebhookTestEvent(w))
	if err != nil {
		return nil, err
	}
	if len(res.Deliveries) == 0 {
		return nil, ErrNotFound
	}
	return res, nil
}

// Resend sends delivery deliveryID of w again, whatever its state (DESIGN.md's manual retry, for
// one delivery); a delivered one is sent once more with the same webhook-id. Resends asked for
// together are one: an attempt that starts after asked answers it.
func (s *Service) Resend(ctx context.Context, w *model.Webhook, deliveryID int64, asked time.Time) (model.DeliveryRef, error) {
	var ref model.DeliveryRef
	err := s.temporal(ctx, "resend", func(ctx context.Context, d *dispatch.Dispatcher) error {
		var err error
		ref, err = d.Resend(dispatch.WithAskedAt(ctx, asked), s.db, w.ID, deliveryID)
		return err
	})
	if err == nil {
		s.recordAfter(ctx, w, audit.DeliveryRetry, audit.TargetDelivery, deliveryID, audit.Changes{"webhookId": audit.Changed(nil, w.ID)})
	}
	return ref, err
}

// Retried is what a manual retry of a webhook started.
type Retried struct {
	// Count exhausted deliveries run their schedule again, signaled by workflow WorkflowID (empty
	// when there was none).
	Count      int
	WorkflowID string
	// Test is the fresh test event of a variant that sends one (nil otherwise).
	Test *model.PublishResult
}

// Retry is the owner's manual retry of w: RetryExhausted, then, in a variant that sends test
// events, a fresh one (spec 6.3).
func (s *Service) Retry(ctx context.Context, w *model.Webhook) (Retried, error) {
	r, err := s.RetryExhausted(ctx, w)
	if err != nil || !w.Variant.Spec().TestEvent {
		return r, err
	}
	r.Test, err = s.Publish(ctx, model.WebhookTestEvent(w))
	return r, err
}

// RetryExhausted enables w if it was disabled and runs every exhausted delivery of it again, in
// the background (a RetryWebhookWorkflow). The operator's retry is this alone: the test event is
// the owner's check of a receiver.
func (s *Service) RetryExhausted(ctx context.Context, w *model.Webhook) (Retried, error) {
	var r Retried
	err := s.temporal(ctx, "retry", func(ctx context.Context, d *dispatch.Dispatcher) error {
		var err error
		r.Count, r.WorkflowID, err = d.RetryWebhook(ctx, s.db, w.ID)
		return err
	})
	if err == nil {
		s.recordAfter(ctx, w, audit.Retry, audit.TargetWebhook, w.ID, audit.Changes{"count": audit.Changed(nil, r.Count)})
	}
	return r, err
}

// Recovery is a window of w's deliveries to send again: those created from Since until Until (nil:
// the time the recovery starts, so identical requests agree) that did not succeed.
type Recovery struct {
	Since time.Time
	Until *time.Time
}

// Check refuses a window out of range or inverted at now, naming its field.
func (r Recovery) Check(now time.Time) error {
	_, err := r.check(0, now)
	return err
}

// check is Check, and the window as the dispatcher takes it.
func (r Recovery) check(webhookID int64, now time.Time) (model.Recovery, error) {
	m := model.Recovery{WebhookID: webhookID, Since: r.Since, Until: now}
	if r.Until != nil {
		m.Until = *r.Until
	}
	var de *input.DataError
	if err := m.Check(now); errors.As(err, &de) {
		return m, invalid(de.Field, "%s %s", de.Field, de.Reason)
	} else if err != nil {
		return m, err
	}
	if r.Until == nil {
		m.Until = time.Time{}
	}
	return m, nil
}

// Recover sends again every delivery of w in the window that did not succeed, in the background (a
// RecoverWorkflow, which requests for the same window join).
func (s *Service) Recover(ctx context.Context, w *model.Webhook, r Recovery) (dispatch.Recovering, error) {
	now := s.clock.Now()
	m, err := r.check(w.ID, now)
	if err != nil {
		return dispatch.Recovering{}, err
	}
	var rec dispatch.Recovering
	err = s.temporal(ctx, "recover", func(ctx context.Context, d *dispatch.Dispatcher) error {
		var err error
		rec, err = d.Recover(ctx, s.db, m, now)
		return err
	})
	if err == nil {
		s.recordAfter(ctx, w, audit.Recover, audit.TargetWebhook, w.ID, audit.Changes{
			"since": audit.Changed(nil, r.Since), "until": audit.Changed(nil, rec.Until), "count": audit.Changed(nil, rec.Queued)})
	}
	return rec, err
}

// CountRecoverable is how many deliveries Recover would send again now.
func (s *Service) CountRecoverable(ctx context.Context, w *model.Webhook, r Recovery) (int, error) {
	now := s.clock.Now()
	m, err := r.check(w.ID, now)
	if err != nil {
		return 0, err
	}
	if m.Until.IsZero() {
		m.Until = now
	}
	n, _, err := model.CountDeliveries(ctx, s.db, m.Query())
	return n, err
}
