package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
)

// maxResponseKept is how much of a receiver's reply the attempt log keeps.
const maxResponseKept = 1 << 10

// Deliver makes one attempt: it loads the event and webhook, has the receiver's kind build what it
// sends, send it and classify the outcome (receiverKind), and records the outcome. The receiver's
// failure is a result, not an error: Temporal never retries an attempt (the workflow's timers are
// the schedule). An error means our own infrastructure failed (the database), and Temporal retries
// that; a failure no retry fixes ends the delivery (failPermanently).
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error) {
	t, ended, err := a.target(ctx, in)
	if t == nil {
		return ended, err
	}
	at := &attempt{in: in, t: t}
	kind := a.kindOf(&t.Webhook)
	if err := kind.build(at); err != nil {
		var perm *permanentError
		if errors.As(err, &perm) {
			return DeliverResult{}, a.failPermanently(ctx, in, perm.errType, perm.reason, perm.cause)
		}
		return DeliverResult{}, err
	}
	x, err := kind.send(ctx, at)
	if err != nil {
		return DeliverResult{}, err
	}
	if x.held != nil {
		return a.heldResult(ctx, in, x.held), nil
	}
	return a.record(ctx, in, &t.Webhook, &t.Event, kind.classify(ctx, at, x), x)
}

// target loads the attempt's delivery target. It returns nil, with the attempt's result, when no
// attempt is to be made: the attempt was recorded as delivered already, the webhook was deleted
// (the delivery is canceled) or is disabled (the delivery is held).
func (a *Activities) target(ctx context.Context, in DeliverInput) (*model.DeliveryTarget, DeliverResult, error) {
	t, err := model.LoadDeliveryTarget(ctx, a.DB, in.DeliveryID)
	if errors.Is(err, model.ErrNotFound) {
		return nil, DeliverResult{}, a.failPermanently(ctx, in, ErrTypeDeliveryMissing, "the delivery row does not exist", err)
	}
	if err != nil {
		return nil, DeliverResult{}, fmt.Errorf("load delivery %d: %w", in.DeliveryID, err)
	}
	w := &t.Webhook
	switch {
	case t.AlreadyDelivered(in.Attempt):
		// This attempt delivered, and runs again because its result was lost: the receiver is not
		// sent the event a second time.
		activity.GetLogger(ctx).Info("delivery attempt already recorded as delivered; not sent again", "delivery", in.DeliveryID, "attempt", in.Attempt)
		return nil, DeliverResult{Delivered: true, Recorded: true}, nil
	case w.DeletedAt != nil:
		return nil, DeliverResult{WebhookGone: true}, model.CancelDelivery(ctx, a.DB, in.DeliveryID)
	case t.State == model.DeliveryCanceled:
		// Skipped by its owner (an ordered lane's head, docs/ordering.md) before this attempt: it
		// ends as a deleted webhook's does, and is not sent.
		return nil, DeliverResult{WebhookGone: true}, nil
	case w.Disabled():
		// Held, not lost: a manual retry once the webhook is enabled delivers it.
		const reason = "the webhook is disabled; enable it and retry to deliver this event"
		return nil, DeliverResult{WebhookDisabled: true, Error: reason}, model.HoldDelivery(ctx, a.DB, in.DeliveryID, reason)
	}
	return t, DeliverResult{}, nil
}

// heldResult is the result of an attempt held before anything was sent: by its receiver's turn
// (a busy host or endpoint, a rate limit, a breaker's probe), or by a failure of the egress proxy
// itself, the operator's outage, not the receiver's. Nothing reached the receiver, so nothing is
// recorded: the attempt is held (DeliverResult.HostBusy) and made again at its appointment, and
// the delivery keeps its place in its schedule (egress/proxygate.go). The operator's log names the
// proxy's failure (HeldError.Cause); the webhook's owner sees a wait.
func (a *Activities) heldResult(ctx context.Context, in DeliverInput, held *egress.HeldError) DeliverResult {
	if held.Cause != nil {
		activity.GetLogger(ctx).Warn("egress proxy failed; the attempt is held", "delivery", in.DeliveryID, "err", held.Cause.Error(), "retry_in", held.RetryIn)
	}
	return DeliverResult{HostBusy: true, HeldBy: string(held.Reason), Error: held.Error(), RetryIn: held.RetryIn}
}

// record writes attempt res of delivery in, with what exchange x sent and got back, and counts it;
// a success that ended the webhook's failure gives the webhook.recovered notice that the workflow
// starts (res.Notices).
func (a *Activities) record(ctx context.Context, in DeliverInput, w *model.Webhook, ev *model.Event, res DeliverResult, x *exchange) (DeliverResult, error) {
	started, latency, resp, sent := res.AttemptedAt, x.latency, x.resp, x.sent
	var respBody []byte
	if resp != nil {
		respBody = resp.Body
	}
	o := model.AttemptOutcome{Success: res.Delivered, Rules: a.Notices}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = in.DeliveryID, in.Attempt, w.URL, started, latency.Milliseconds()
	if res.StatusCode != 0 {
		status := res.StatusCode
		o.StatusCode = &status
	}
	if !res.Delivered {
		o.ErrorClass, o.Error = &res.ErrorClass, &res.Error
		if in.NextAttemptIn > 0 {
			res.NextAttemptIn = nextAttemptIn(in, resp, a.now())
			// The workflow's timer starts when this attempt ends.
			next := started.Add(latency + res.NextAttemptIn)
			o.NextAttemptAt = &next
		}
	}
	if sent != "" {
		o.RequestHeaders = &sent
	}
	if len(respBody) > 0 {
		kept := truncateUTF8(respBody, maxResponseKept)
		o.ResponseBody = &kept
	}
	recovered, err := model.RecordAttempt(ctx, a.DB, w, o)
	if err != nil {
		return DeliverResult{}, err
	}
	if recovered != nil {
		res.Notices = append(res.Notices, recovered.Event.ID)
	}
	if a.Metrics != nil {
		a.Metrics.observeAttempt(w.Variant, ev.EventType, res, latency)
		if w.IsChannel() {
			a.Metrics.observeNotice(w.Kind, ev.EventType, res.Delivered)
		}
	}
	activity.GetLogger(ctx).Info("delivery attempt", "delivery", in.DeliveryID, "webhook", w.ID, "attempt", in.Attempt,
		"delivered", res.Delivered, "status", res.StatusCode, "error_class", res.ErrorClass, "latency_ms", latency.Milliseconds())
	return res, nil
}

// localTurnWait is how long a first attempt, a local activity, may wait in the worker for a turn
// at a receiver that is busy but quick (its host or endpoint at its cap, the next turn due within
// this). Handing the attempt back instead costs a regular activity: an activity task and a second
// workflow task, which measured 1.2 ms of the Temporal server's CPU per delivery when 15% of a
// quick endpoint's first attempts met its cap (docs/performance-history.md). A turn further out
// than this (a slow or hanging receiver) is handed back at once, as before, and
// Activities.LocalWaits bounds how many wait at once, so neither holds a workflow task for long.
const localTurnWait = 200 * time.Millisecond

// takeTurn takes the attempt's turn at its receiver (egress.Client.Take). A local attempt, while a
// LocalWaits place is free, may wait up to localTurnWait for a turn due within it, in the host's
// line (egress.Request.QuickWait); what it cannot have by then is held back as Take holds it, with
// one appointment.
func (a *Activities) takeTurn(ctx context.Context, info activity.Info, req egress.Request) (*egress.Turn, error) {
	if info.IsLocalActivity && req.Wait == 0 {
		if a.localWaiting.Add(1) <= int64(a.LocalWaits) {
			req.QuickWait = localTurnWait
		}
		defer a.localWaiting.Add(-1)
	}
	return a.Egress.Take(ctx, req)
}

// turnWait is how long an attempt may wait in the worker for its turn at the receiver: none for a
// local attempt (it would hold its workflow task), and for a regular one what its activity's
// StartToClose leaves after the exchange and the record (AttemptBudget.TurnWait).
func (a *Activities) turnWait(ctx context.Context, info activity.Info, attemptTimeout time.Duration) time.Duration {
	deadline, ok := ctx.Deadline()
	if info.IsLocalActivity || !ok {
		return 0
	}
	exchange := attemptTimeout
	if exchange <= 0 || exchange > a.Egress.Timeout() {
		exchange = a.Egress.Timeout()
	}
	return AttemptBudget{Timeout: exchange}.TurnWait(time.Until(deadline))
}

// endpointOf is the webhook as the egress client's limits see it.
func (a *Activities) endpointOf(w *model.Webhook) egress.Endpoint {
	ep := egress.Endpoint{Account: w.AccountID, Webhook: w.ID}
	if w.MaxInFlight != nil {
		ep.MaxInFlight = *w.MaxInFlight
	}
	if w.RateLimit != nil {
		ep.RateLimit = *w.RateLimit
		ep.RecheckRateLimit = func(ctx context.Context) (int, error) { return model.WebhookRateLimit(ctx, a.DB, w.ID) }
	}
	return ep
}

// nextAttemptIn is the wait before the next attempt: the scheduled one, unless the receiver
// answered 429 or 503 with a longer Retry-After, which is honoured up to the schedule's longest
// delay (a receiver cannot park a delivery beyond the schedule).
func nextAttemptIn(in DeliverInput, resp *egress.Response, now time.Time) time.Duration {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return in.NextAttemptIn
	}
	asked, ok := egress.RetryAfter(resp.Header, now)
	if !ok {
		return in.NextAttemptIn
	}
	return max(in.NextAttemptIn, min(asked, in.MaxRetryDelay))
}

func truncateUTF8(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return model.Now()
}
