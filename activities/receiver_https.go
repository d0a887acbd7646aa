package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// httpsReceiver is the kind of an HTTPS receiver: a webhook, whose body is the event in its
// variant and version (webhookRender), and a notification endpoint that is an operational webhook
// or a chat channel (noticeRender). The attempt is a signed POST made on the receiver's turn
// (egress.Client.Take: its host's and endpoint's caps, its rate limit, its breaker), with the
// webhook's own headers and authentication.
type httpsReceiver struct {
	a      *Activities
	render func(a *Activities, at *attempt, secrets []string) ([]byte, error)

	settings receiverSettings
	body     []byte
	authz    authorization
	span     trace.Span
}

// webhookRender is a webhook's body: the event's data in the version of its type that the webhook
// receives (docs/events.md, "Versions"), as stored while the two agree, converted down by a's table
// of versions otherwise.
func webhookRender(a *Activities, at *attempt, secrets []string) ([]byte, error) {
	w, ev := &at.t.Webhook, &at.t.Event
	data, err := ev.DataFor(a.Versions, w)
	if err != nil {
		return nil, &permanentError{errType: ErrTypeVersionUnconvertible, cause: err,
			reason: fmt.Sprintf("the event's data (version %d) cannot be converted to the webhook's version %d", ev.Version, w.Version)}
	}
	return wire.Body(w.Variant.Spec().Body, ev.EventType, data, ev.OccurredAt, secrets[0]), nil
}

// noticeRender is a notification endpoint's body (noticeBody).
func noticeRender(_ *Activities, at *attempt, _ []string) ([]byte, error) {
	return noticeBody(at.t.Webhook.Kind, &at.t.Event), nil
}

func (k *httpsReceiver) build(at *attempt) error {
	var err error
	if k.settings, err = k.a.openSettings(&at.t.Webhook); err != nil {
		return err
	}
	k.body, err = k.render(k.a, at, k.settings.secrets)
	return err
}

// tokenError is the failure to get the attempt's OAuth2 token: nothing was sent to the receiver.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }

func (k *httpsReceiver) send(ctx context.Context, at *attempt) (*exchange, error) {
	a, in, w, ev := k.a, at.in, &at.t.Webhook, &at.t.Event
	if k.settings.auth != nil {
		// Before the turn: a token endpoint that fails costs the receiver nothing, and the
		// attempt fails as the webhook's own, through the failed-attempt path.
		fetched := a.now()
		var err error
		if k.authz, err = a.authorize(ctx, w, k.settings.auth, in.AttemptTimeout); err != nil {
			if held := a.Egress.ProxyHold(ctx, err); held != nil {
				return &exchange{held: held}, nil
			}
			return &exchange{started: fetched, latency: a.now().Sub(fetched), err: &tokenError{err}}, nil
		}
	}

	info := activity.GetInfo(ctx)
	turn, postErr := a.takeTurn(ctx, info, egress.Request{
		URL: w.URL, Endpoint: a.endpointOf(w), Timeout: in.AttemptTimeout, Wait: a.turnWait(ctx, info, in.AttemptTimeout),
		Key: strconv.FormatInt(in.DeliveryID, 10), TLS: receiverTLS(k.settings.tls),
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
		return &exchange{held: held}, nil
	}
	if turn == nil && ctx.Err() != nil {
		// The activity ended while it waited for its turn: nothing was sent.
		return nil, fmt.Errorf("delivery %d: waiting for a turn: %w", in.DeliveryID, postErr)
	}
	defer turn.Cancel()

	// The clock starts with the turn: the webhook-timestamp and the latency leave out the wait.
	x := &exchange{started: a.now()}
	msgID := wire.MessageID(ev.ID, w.ID)
	signature, err := wire.StandardSignature(msgID, x.started, k.body, k.settings.secrets...)
	if err != nil {
		return nil, fmt.Errorf("sign delivery %d: %w", in.DeliveryID, err)
	}
	header := wire.DeliveryHeader(msgID, ev.EventType, a.UserAgent, x.started)
	if seq := at.t.LaneSeq; seq != nil {
		header.Set(wire.HeaderSequence, strconv.FormatInt(*seq, 10))
		if in.Resend {
			header.Set(wire.HeaderResend, "true")
		}
	}
	postCtx := ctx
	if postErr == nil {
		postCtx, k.span = a.startPost(ctx, in, w, ev.EventType, header)
	}
	x.sent = sentHeaders(header, k.settings.headers, k.authz.shown)
	header.Set(wire.HeaderSignature, signature)
	addCustomHeaders(header, k.settings.headers)
	if k.authz.header != "" {
		header.Set("Authorization", k.authz.header)
	}
	if postErr == nil {
		x.resp, postErr = turn.Post(postCtx, header, k.body)
	}
	if errors.As(postErr, &held) {
		// The egress proxy failed: no receiver was reached, and the attempt is held, not failed.
		a.endPost(ctx, k.span, in, w.ID, ev.EventType, DeliverResult{ErrorClass: ClassProxy})
		return &exchange{held: held}, nil
	}
	x.latency, x.err = a.now().Sub(x.started), postErr
	return x, nil
}

func (k *httpsReceiver) classify(ctx context.Context, at *attempt, x *exchange) DeliverResult {
	a, in, w := k.a, at.in, &at.t.Webhook
	res := DeliverResult{AttemptedAt: x.started}
	var tokenErr *tokenError
	if errors.As(x.err, &tokenErr) {
		res.ErrorClass, res.Error = ClassAuthFailed, tokenFailure(tokenErr.err, k.settings.auth.TokenURL)
		return res
	}
	if x.resp != nil {
		res.StatusCode = x.resp.StatusCode
	}
	switch status := res.StatusCode; {
	case x.err != nil:
		res.ErrorClass, res.Error = egress.Classify(x.err)
		// The owner's message leaves the proxy out; the operator's log names it.
		var proxyErr *egress.ProxyError
		if errors.As(x.err, &proxyErr) {
			activity.GetLogger(ctx).Warn("egress proxy could not reach the receiver", "delivery", in.DeliveryID, "error_class", res.ErrorClass, "err", proxyErr.Error())
		}
	case status >= 300 && status < 400:
		res.ErrorClass, res.Error = ClassRedirect, fmt.Sprintf("receiver answered %d (redirects are not followed)", status)
	case status < 200 || status >= 300:
		res.ErrorClass, res.Error = ClassHTTPStatus, fmt.Sprintf("receiver answered %d", status)
	default:
		res.Delivered = true
	}
	a.endPost(ctx, k.span, in, w.ID, at.t.Event.EventType, res)
	if res.StatusCode == http.StatusUnauthorized && k.authz.token != "" {
		a.Tokens.Invalidate(w.ID, k.settings.auth, k.authz.token)
	}
	return res
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

// receiverTLS is the egress form of a webhook's TLS settings, nil for none: such a webhook is
// delivered through a transport built for them, every other through the shared one.
func receiverTLS(t *model.ReceiverTLS) *egress.ReceiverTLS {
	if t == nil {
		return nil
	}
	return &egress.ReceiverTLS{CACert: t.CACert, ClientCert: t.ClientCert, ClientKey: t.ClientKey}
}
