package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// ClassMail is the error class of a notice e-mail the mail server did not take.
const ClassMail = "mail"

// noticeBody is the body a notification endpoint of kind kind receives for notice ev: an
// operational webhook the notice itself (wire.NoticeBody), a chat one line for a person.
func noticeBody(kind string, ev *model.Event) []byte {
	if kind == model.KindNoticeChat {
		return wire.ChatBody(model.NoticeLine(ev))
	}
	return wire.NoticeBody(ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt)
}

// noticeMail is the e-mail of notice ev to the owner at to: the alert and disable e-mails of old
// for webhook.failing and webhook.disabled by the rule, a short note for the others.
func noticeMail(l Links, to string, ev *model.Event) Mail {
	d := model.DecodeNoticeData(ev)
	w := &model.Webhook{ID: d.WebhookID, URL: d.URL, Variant: d.Variant, EventType: d.EventType, FailingSince: d.FailingSince, ExhaustedCount: d.FailureCount}
	lastError, eventType := "", d.EventType
	if d.LastError != nil {
		lastError = d.LastError.Message
		if d.LastError.EventType != "" {
			eventType = d.LastError.EventType // the event that failed: webhook.test, say
		}
	}
	switch {
	case ev.EventType == model.NoticeTest:
		return Mail{To: to, Subject: "[webhookd] test notice", Body: model.NoticeLine(ev) + "\n"}
	case d.Channel != "":
		return channelMail(to, ev.EventType, d, lastError)
	case ev.EventType == model.NoticeFailing:
		m := alertMail(l, to, w, eventType, lastError)
		if d.Suppressed > 0 {
			m.Body += fmt.Sprintf("\nIt failed and recovered %d more times since the last notice; those were kept quiet.\n", d.Suppressed)
		}
		return m
	case ev.EventType == model.NoticeDisabled && d.By == model.ActorRule:
		return disabledMail(l, to, w, eventType, lastError)
	}
	line := model.NoticeLine(ev)
	return Mail{To: to, Subject: fmt.Sprintf("[webhookd] webhook %d: %s", d.WebhookID, ev.EventType), Body: line + "\n\n" + noticeDetails(d)}
}

// channelMail tells the owner that one of their notification endpoints fails: no other channel
// hears of it, so that a channel never reports on itself.
func channelMail(to, noticeType string, d model.NoticeData, lastError string) Mail {
	var b strings.Builder
	fmt.Fprintf(&b, "Your notification endpoint %d (%s, kind %s): %s.\n\n", d.WebhookID, d.URL, d.Channel, noticeType)
	fmt.Fprintf(&b, "Last error:  %s\n\n", lastError)
	b.WriteString("Notices meant for it are not delivered while it fails. Fix the receiver, or change the\n")
	b.WriteString("endpoint at " + d.Variant.Spec().APIPrefix + "/notification-endpoints.\n")
	return Mail{To: to, Subject: fmt.Sprintf("[webhookd] notification endpoint %d: %s", d.WebhookID, noticeType), Body: b.String()}
}

func noticeDetails(d model.NoticeData) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Webhook:       %d\nURL:           %s\nEvent type:    %s\nStatus:        %s\nFailures:      %d\nAt:            %s\n",
		d.WebhookID, d.URL, d.EventType, d.Status, d.FailureCount, d.At.UTC().Format(time.RFC3339))
	if d.PortalURL != "" {
		fmt.Fprintf(&b, "Portal:        %s\n", d.PortalURL)
	}
	return b.String()
}

// noticeMessageID is the Message-ID of the mail of notice eventID to the e-mail channel channelID:
// the delivery's webhook-id, at the host of the service's public URL (WEBHOOKD_PUBLIC_URL), which
// names the installation: a staging and a production that share a sender must not share ids, or a
// mail client would hide one's mail as a copy of the other's. Without a public URL, the sender's
// domain (Mail.MessageID).
func noticeMessageID(l Links, eventID, channelID int64) string {
	id := wire.MessageID(eventID, channelID)
	u, err := url.Parse(l.APIBaseURL)
	if err != nil || u.Hostname() == "" {
		return id
	}
	if host := u.Hostname(); strings.Contains(host, ":") {
		return id + "@[" + host + "]" // an IPv6 address, as a domain literal
	}
	return id + "@" + u.Hostname()
}

// deliverMail makes one attempt of a notice to the owner's e-mail (a notification endpoint of kind
// KindNoticeEmail) and records it like any attempt: a mail server that does not take it fails the
// attempt, and the schedule tries again.
func (a *Activities) deliverMail(ctx context.Context, in DeliverInput, t *model.DeliveryTarget) (DeliverResult, error) {
	w, ev := &t.Webhook, &t.Event
	started := a.now()
	res := DeliverResult{AttemptedAt: started, Delivered: true}
	m := noticeMail(a.Links, strings.TrimPrefix(w.URL, "mailto:"), ev)
	m.MessageID = noticeMessageID(a.Links, ev.ID, w.ID)
	if err := a.Mailer.Send(ctx, m); err != nil {
		res.Delivered, res.ErrorClass, res.Error = false, ClassMail, "the mail server did not take the notice: "+err.Error()
	}
	return a.record(ctx, in, w, ev, res, a.now().Sub(started), nil, "", nil)
}
