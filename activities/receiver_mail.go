package activities

import (
	"context"
	"strings"
)

// mailReceiver is the kind of a notification endpoint of kind KindNoticeEmail: a notice sent to
// the owner's e-mail. A mail server that does not take it fails the attempt, and the schedule
// tries again.
type mailReceiver struct {
	a    *Activities
	mail Mail
}

func (k *mailReceiver) build(at *attempt) error {
	w, ev := &at.t.Webhook, &at.t.Event
	k.mail = noticeMail(k.a.Links, strings.TrimPrefix(w.URL, "mailto:"), ev)
	k.mail.MessageID = noticeMessageID(k.a.Links, ev.ID, w.ID)
	return nil
}

func (k *mailReceiver) send(ctx context.Context, at *attempt) (*exchange, error) {
	x := &exchange{started: k.a.now()}
	x.err = k.a.Mailer.Send(ctx, k.mail)
	x.latency = k.a.now().Sub(x.started)
	return x, nil
}

func (k *mailReceiver) classify(_ context.Context, _ *attempt, x *exchange) DeliverResult {
	res := DeliverResult{AttemptedAt: x.started, Delivered: x.err == nil}
	if x.err != nil {
		res.ErrorClass, res.Error = ClassMail, "the mail server did not take the notice: "+x.err.Error()
	}
	return res
}
