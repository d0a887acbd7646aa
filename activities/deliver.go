package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// maxResponseKept is how much of a receiver's reply the attempt log keeps.
const maxResponseKept = 1 << 10

// Deliver makes one attempt: it loads the event and webhook, builds and signs the body, POSTs it
// and records the outcome. The receiver's failure is a result, not an error: Temporal never
// retries an HTTP attempt (the workflow's timers are the schedule). An error means our own
// infrastructure failed (the database), and Temporal retries that.
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error) {
	target, err := model.LoadDeliveryTarget(ctx, a.DB, in.DeliveryID)
	if errors.Is(err, model.ErrNotFound) {
		return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeDeliveryMissing, "the delivery row does not exist", err)
	}
	if err != nil {
		return DeliverResult{}, fmt.Errorf("load delivery %d: %w", in.DeliveryID, err)
	}
	if target.AlreadyDelivered(in.Attempt) {
		// This attempt delivered, and ran again because its result was lost: the receiver is not
		// sent the event a second time.
		activity.GetLogger(ctx).Info("delivery attempt already recorded as delivered; not sent again", "delivery", in.DeliveryID, "attempt", in.Attempt)
		return DeliverResult{Delivered: true, Recorded: true}, nil
	}
	w := &target.Webhook
	if w.DeletedAt != nil {
		if err := model.CancelDelivery(ctx, a.DB, in.DeliveryID); err != nil {
			return DeliverResult{}, err
		}
		return DeliverResult{WebhookGone: true}, nil
	}
	if w.Disabled() {
		// Held, not lost: a manual retry once the webhook is enabled delivers it.
		const reason = "the webhook is disabled; enable it and retry to deliver this event"
		if err := model.HoldDelivery(ctx, a.DB, in.DeliveryID, reason); err != nil {
			return DeliverResult{}, err
		}
		return DeliverResult{WebhookDisabled: true, Error: reason}, nil
	}
	if w.Kind == model.KindNoticeEmail {
		return a.deliverMail(ctx, in, target)
	}
	secrets, err := a.signingSecrets(w)
	if err != nil {
		// Opening a secret reads no database: it fails the same way every time until an operator
		// restores the key the secret was sealed with.
		return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeSecretUnreadable,
			"the webhook's signing secret cannot be opened with the current WEBHOOKD_SECRET_KEY", err)
	}
	var custom map[string]string
	if w.Headers != nil {
		if custom, err = a.Secrets.WebhookHeaders(w); err != nil {
			return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeSecretUnreadable,
				"the webhook's headers cannot be opened with the current WEBHOOKD_SECRET_KEY", err)
		}
	}
	auth, err := a.Secrets.WebhookAuth(w)
	if err != nil {
		return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeSecretUnreadable,
			"the webhook's authentication cannot be opened with the current WEBHOOKD_SECRET_KEY", err)
	}
	rt, err := a.Secrets.WebhookTLS(w)
	if err != nil {
		return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeSecretUnreadable,
			"the webhook's TLS settings cannot be opened with the current WEBHOOKD_SECRET_KEY", err)
	}
	ev := &target.Event
	var authz authorization
	if auth != nil {
		// Before the turn: a token endpoint that fails costs the receiver nothing, and the
		// attempt fails as the webhook's own, through the failed-attempt path.
		fetched := a.now()
		if authz, err = a.authorize(ctx, w, auth, in.AttemptTimeout); err != nil {
			if held := a.Egress.ProxyHold(ctx, err); held != nil {
				return a.heldByProxy(ctx, in, held), nil
			}
			res := DeliverResult{AttemptedAt: fetched, ErrorClass: ClassAuthFailed, Error: tokenFailure(err, auth.TokenURL)}
			return a.record(ctx, in, w, ev, res, a.now().Sub(fetched), nil, "", nil)
		}
	}
	var body []byte
	if w.IsChannel() {
		body = noticeBody(w.Kind, ev)
	} else {
		// The event's data in the version of its type that the webhook receives (docs/events.md,
		// "Versions"): as stored while the two agree, converted down otherwise.
		data, err := ev.DataFor(w)
		if err != nil {
			return DeliverResult{}, a.failPermanently(ctx, in, ErrTypeVersionUnconvertible,
				fmt.Sprintf("the event's data (version %d) cannot be converted to the webhook's version %d", ev.Version, w.Version), err)
		}
		body = wire.Body(w.Variant.Spec().Body, ev.EventType, data, ev.OccurredAt, secrets[0])
	}

	info := activity.GetInfo(ctx)
	turn, postErr := a.takeTurn(ctx, info, egress.Request{
		URL: w.URL, Endpoint: a.endpointOf(w), Timeout: in.AttemptTimeout, Wait: a.turnWait(ctx, info, in.AttemptTimeout),
		Key: strconv.FormatInt(in.DeliveryID, 10), TLS: receiverTLS(rt),
	})
	var held *egress.HeldError
	if errors.As(postErr, &held) {
		// Nothing was sent, so there is no attempt to record: a hold is a wait, never a failure.
		// A local attempt hands the attempt back at once: waiting for its turn, it would hold its
		// workflow task, and a workflow slot, for as long as the wait lasts, and a burst to one
		// account's slow receiver would then starve other accounts' first attempts. The workflow
		// runs it as a regular activity, which waits its turn in the worker, where a busy host's
		// slots are shared fairly across accounts. A regular attempt whose turn is further out
		// than it may wait ends, and its workflow sleeps on a durable timer until the turn booked
		// for it (RetryIn), holding no worker slot meanwhile.
		return DeliverResult{HostBusy: true, HeldBy: string(held.Reason), Error: held.Error(), RetryIn: held.RetryIn}, nil
	}
	if turn == nil && ctx.Err() != nil {
		// The activity ended while it waited for its turn: nothing was sent.
		return DeliverResult{}, fmt.Errorf("delivery %d: waiting for a turn: %w", in.DeliveryID, postErr)
	}
	defer turn.Cancel()

	// The clock starts with the turn: the webhook-timestamp and the latency leave out the wait.
	started := a.now()
	msgID := wire.MessageID(ev.ID, w.ID)
	signature, err := wire.StandardSignature(msgID, started, body, secrets...)
	if err != nil {
		return DeliverResult{}, fmt.Errorf("sign delivery %d: %w", in.DeliveryID, err)
	}
	header := wire.DeliveryHeader(msgID, ev.EventType, a.UserAgent, started)
	postCtx, postSpan := ctx, trace.Span(nil)
	if postErr == nil {
		postCtx, postSpan = a.startPost(ctx, in, w, ev.EventType, header)
	}
	sent := sentHeaders(header, custom, authz.shown)
	header.Set(wire.HeaderSignature, signature)
	addCustomHeaders(header, custom)
	if authz.header != "" {
		header.Set("Authorization", authz.header)
	}
	var resp *egress.Response
	if postErr == nil {
		resp, postErr = turn.Post(postCtx, header, body)
	}
	if errors.As(postErr, &held) {
		// The egress proxy failed: no receiver was reached, and the attempt is held, not failed.
		a.endPost(ctx, postSpan, in, w.ID, ev.EventType, DeliverResult{ErrorClass: ClassProxy})
		return a.heldByProxy(ctx, in, held), nil
	}
	latency := a.now().Sub(started)
	var status int
	var respBody []byte
	if resp != nil {
		status, respBody = resp.StatusCode, resp.Body
	}

	res := DeliverResult{StatusCode: status, AttemptedAt: started}
	switch {
	case postErr != nil:
		res.ErrorClass, res.Error = egress.Classify(postErr)
		// The owner's message leaves the proxy out; the operator's log names it.
		var proxyErr *egress.ProxyError
		if errors.As(postErr, &proxyErr) {
			activity.GetLogger(ctx).Warn("egress proxy could not reach the receiver", "delivery", in.DeliveryID, "error_class", res.ErrorClass, "err", proxyErr.Error())
		}
	case status >= 300 && status < 400:
		res.ErrorClass, res.Error = ClassRedirect, fmt.Sprintf("receiver answered %d (redirects are not followed)", status)
	case status < 200 || status >= 300:
		res.ErrorClass, res.Error = ClassHTTPStatus, fmt.Sprintf("receiver answered %d", status)
	default:
		res.Delivered = true
	}
	a.endPost(ctx, postSpan, in, w.ID, ev.EventType, res)
	if status == http.StatusUnauthorized && authz.token != "" {
		a.Tokens.Invalidate(w.ID, auth, authz.token)
	}

	return a.record(ctx, in, w, ev, res, latency, resp, sent, respBody)
}

// heldByProxy is the result of an attempt that met a failure of the egress proxy itself: the
// operator's outage, not the receiver's. Nothing reached the receiver, so nothing is recorded: the
// attempt is held (DeliverResult.HostBusy) and made again at its appointment, as one held by a
// busy host is, and the delivery keeps its place in its schedule (egress/proxygate.go). The
// operator's log names the proxy's failure; the webhook's owner sees a wait.
func (a *Activities) heldByProxy(ctx context.Context, in DeliverInput, held *egress.HeldError) DeliverResult {
	if held.Cause != nil {
		activity.GetLogger(ctx).Warn("egress proxy failed; the attempt is held", "delivery", in.DeliveryID, "err", held.Cause.Error(), "retry_in", held.RetryIn)
	}
	return DeliverResult{HostBusy: true, HeldBy: string(held.Reason), Error: held.Error(), RetryIn: held.RetryIn}
}

// record writes attempt res of delivery in, which took latency, with what was sent and answered,
// and counts it; a success that ended the webhook's failure gives the webhook.recovered notice
// that the workflow starts (res.Notices).
func (a *Activities) record(ctx context.Context, in DeliverInput, w *model.Webhook, ev *model.Event, res DeliverResult, latency time.Duration,
	resp *egress.Response, sent string, respBody []byte) (DeliverResult, error) {
	started := res.AttemptedAt
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

// signingSecrets returns the webhook's current secret first, then every rotated-out secret still
// inside its own overlap (newest first): all sign, so receivers can switch at their own pace, even
// across several rotations. The variant B body signature uses the first, the current one.
func (a *Activities) signingSecrets(w *model.Webhook) ([]string, error) {
	current, err := a.Secrets.WebhookSecret(w)
	if err != nil {
		return nil, err
	}
	secrets := []string{current}
	now := a.now()
	for _, p := range w.PreviousSecrets {
		if !now.Before(p.ExpiresAt) {
			continue
		}
		prev, err := a.Secrets.Open(p.Secret)
		if err != nil {
			return nil, fmt.Errorf("open previous secret %d of webhook %d: %w", p.ID, w.ID, err)
		}
		secrets = append(secrets, prev)
	}
	return secrets, nil
}

// addCustomHeaders adds a webhook's own headers (issue 31) after webhookd's, skipping any refused
// name (wire.HeaderRefusal): they are refused when saved, and one stored before its name was
// refused can neither override webhookd's headers nor be shown by the attempt log as sent when Go's
// client drops it (sentHeaders skips the same names).
func addCustomHeaders(h http.Header, custom map[string]string) {
	for name, value := range custom {
		if !wire.ReservedHeader(name) {
			h.Set(name, value)
		}
	}
}

// sentHeaders is the attempt log's record of what an attempt sent: its headers as a JSON object,
// before the signature is added, so the log never holds a value derived from the secret. The
// webhook's own headers are recorded by name, their values redacted (wire.Redacted): they may be
// credentials. authShown is the Authorization header as recorded ("Basic ••••••••"), "" for none.
func sentHeaders(h http.Header, custom map[string]string, authShown string) string {
	flat := make(map[string]string, len(h)+len(custom)+1)
	for k, v := range h {
		flat[k] = strings.Join(v, ", ")
	}
	for name, value := range custom {
		if !wire.ReservedHeader(name) {
			flat[http.CanonicalHeaderKey(name)] = wire.Redacted(value)
		}
	}
	if authShown != "" {
		flat["Authorization"] = authShown
	}
	b, _ := json.Marshal(flat) // a map of strings always marshals
	return string(b)
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

// receiverTLS is the egress form of a webhook's TLS settings, nil for none: such a webhook is
// delivered through a transport built for them, every other through the shared one.
func receiverTLS(t *model.ReceiverTLS) *egress.ReceiverTLS {
	if t == nil {
		return nil
	}
	return &egress.ReceiverTLS{CACert: t.CACert, ClientCert: t.ClientCert, ClientKey: t.ClientKey}
}
