package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
)

// receiverKind is how an attempt reaches one kind of receiver: an HTTPS endpoint (a webhook, an
// operational webhook, a chat channel: receiver_https.go) or an owner's mailbox
// (receiver_mail.go). Deliver loads the attempt's target, asks the kind to build what it sends,
// to send it, and to classify what came back, and records the outcome: what every kind shares
// (the schedule, the record, the notices, the metrics) stays in Deliver, and a new kind of
// destination is one more file behind this interface. A kind's value serves one attempt.
type receiverKind interface {
	// build makes what the attempt sends: it opens what it needs of the webhook's sealed
	// settings and renders the body. Its error is a failure no retry fixes (*permanentError,
	// which ends the delivery) or one of our own infrastructure.
	build(at *attempt) error
	// send makes the exchange with the receiver and returns it. An exchange held before anything
	// was sent (exchange.held) is a wait, not an outcome. Its error is our own infrastructure's
	// (the database), retried by Temporal; the receiver's failure is in the exchange.
	send(ctx context.Context, at *attempt) (*exchange, error)
	// classify says what the exchange means for the schedule: delivered, or the error class and
	// message the owner reads.
	classify(ctx context.Context, at *attempt, x *exchange) DeliverResult
}

// attempt is one attempt in the making: its input and its target.
type attempt struct {
	in DeliverInput
	t  *model.DeliveryTarget
}

// exchange is what an attempt sent and got back, for its record.
type exchange struct {
	started time.Time
	latency time.Duration
	// resp is the receiver's answer, nil when there was none (err says why).
	resp *egress.Response
	err  error
	// sent is the request's headers as the attempt log records them ("" for none).
	sent string
	// held, when set, means nothing was sent: the attempt waits (DeliverResult.HostBusy).
	held *egress.HeldError
}

// kindOf is the kind of the receiver of webhook w.
func (a *Activities) kindOf(w *model.Webhook) receiverKind {
	switch {
	case w.Kind == model.KindNoticeEmail:
		return &mailReceiver{a: a}
	case w.IsChannel():
		return &httpsReceiver{a: a, render: noticeRender}
	case w.Destination != nil:
		return &brokerReceiver{a: a}
	}
	return &httpsReceiver{a: a, render: webhookRender}
}

// permanentError is a failure of an attempt that no retry can fix (PermanentErrorTypes): Deliver
// ends the delivery with it (failPermanently).
type permanentError struct {
	errType, reason string
	cause           error
}

func (e *permanentError) Error() string { return e.reason + ": " + e.cause.Error() }
func (e *permanentError) Unwrap() error { return e.cause }

// receiverSettings are a webhook's sealed settings, opened for one attempt.
type receiverSettings struct {
	// secrets sign the attempt: the current one first, then every rotated-out one still inside its
	// overlap (signingSecrets).
	secrets []string
	headers map[string]string
	auth    *model.ReceiverAuth
	tls     *model.ReceiverTLS
}

// openSettings opens webhook w's sealed settings into one value. A part that cannot be opened
// fails the same way every time (opening reads no database) until an operator restores the key it
// was sealed with: a *permanentError naming the part.
func (a *Activities) openSettings(w *model.Webhook) (receiverSettings, error) {
	var s receiverSettings
	parts := []struct {
		name string
		open func() error
	}{
		{"signing secret", func() (err error) { s.secrets, err = a.signingSecrets(w); return }},
		{"headers", func() (err error) { s.headers, err = a.Secrets.WebhookHeaders(w); return }},
		{"authentication", func() (err error) { s.auth, err = a.Secrets.WebhookAuth(w); return }},
		{"TLS settings", func() (err error) { s.tls, err = a.Secrets.WebhookTLS(w); return }},
	}
	for _, p := range parts {
		if err := p.open(); err != nil {
			return s, &permanentError{errType: ErrTypeSecretUnreadable, cause: err,
				reason: fmt.Sprintf("the webhook's %s cannot be opened with the current WEBHOOKD_SECRET_KEY", p.name)}
		}
	}
	return s, nil
}
