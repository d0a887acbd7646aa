package activities

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/wire"
)

// ClassMail is the error class of a notice e-mail the mail server did not take.
const ClassMail = "mail"

// noticeBody is the body a notification endpoint of kind kind receives for notice ev: an
// operational webhook the notice itself (wire.NoticeBody), a chat one line for a person.
func noticeBody(kind string, ev *model.Event) []byte {
	if kind == model.KindNoticeChat {
		return wire.ChatBody(notices.Line(ev))
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
		return Mail{To: to, Subject: "[webhookd] test notice", Body: notices.Line(ev) + "\n"}
	case d.Summary != nil:
		return summaryMail(l, to, ev.EventType, d)
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
	line := notices.Line(ev)
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

// summaryMail is the e-mail of a summary of the account rule: the webhooks whose notices of type t
// were held from the e-mail in a quiet period, a line each, and what to do. For webhook.failing it
// is the spec's failing e-mail (3.2, 6.4) of each webhook it names: which failed, with what error,
// and the retry call.
func summaryMail(l Links, to, t string, d model.NoticeData) Mail {
	s := d.Summary
	collection, auth := collectionOf(d.Variant)
	base := strings.TrimSuffix(l.APIBaseURL, "/")
	headline := notices.Headline(t, s)
	var b strings.Builder
	fmt.Fprintf(&b, "%s since %s.\n", headline, s.Since.UTC().Format(time.RFC3339))
	b.WriteString("Notices of one kind are gathered into one e-mail per quiet period, so that an outage across\n")
	b.WriteString("many webhooks sends a few e-mails, not one per webhook.\n\n")
	for _, e := range s.Listed {
		fmt.Fprintf(&b, "  webhook %d, %s, %s: status %q now", e.WebhookID, e.EventType, e.URL, e.Status)
		if t == model.NoticeExhausted {
			fmt.Fprintf(&b, ", %d deliveries", e.Notices)
		}
		b.WriteString("\n")
		if e.LastError != nil && t != model.NoticeRecovered && t != model.NoticeEnabled {
			fmt.Fprintf(&b, "    last error: %s\n", e.LastError.Message)
		}
	}
	if more := s.Webhooks - len(s.Listed); more > 0 {
		fmt.Fprintf(&b, "  and %d more: GET %s%s?status=%s lists the failing ones.\n", more, base, collection, d.Variant.Spec().FailingStatus)
	}
	b.WriteString("\n")
	switch t {
	case model.NoticeFailing, model.NoticeDisabling, model.NoticeExhausted:
		b.WriteString("Once a receiver is fixed, retry its webhook's failed deliveries:\n\n")
		fmt.Fprintf(&b, "  curl -X POST %s%s/<webhook>/retry -H '%s'\n\n", base, collection, auth)
		fmt.Fprintf(&b, "A webhook's delivery log is at GET %s%s/<webhook>/deliveries.\n", base, collection)
		if l.TemporalUIURL != "" {
			fmt.Fprintf(&b, "\nOperators: in the Temporal Web UI (%s/namespaces/%s/workflows) search\n", strings.TrimSuffix(l.TemporalUIURL, "/"), l.TemporalNSpace)
			b.WriteString("  WebhookId=<webhook> AND DeliveryState=\"exhausted\"\nand send the signal \"retry\" to a delivery.\n")
		}
	case model.NoticeDisabled:
		b.WriteString("webhookd makes no further delivery attempts to them. Once a receiver is fixed, re-enable its\n")
		b.WriteString("webhook (this resends nothing), or retry its deliveries (this re-enables it too):\n\n")
		fmt.Fprintf(&b, "  curl -X POST %s%s/<webhook>/enable -H '%s'\n", base, collection, auth)
		fmt.Fprintf(&b, "  curl -X POST %s%s/<webhook>/retry -H '%s'\n", base, collection, auth)
	}
	if d.PortalURL != "" {
		fmt.Fprintf(&b, "\nPortal:        %s\n", d.PortalURL)
	}
	return Mail{To: to, Subject: "[webhookd] " + headline, Body: b.String()}
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
