// Package notices is the notice policy: what webhookd decides and says about a webhook's health
// (docs/notifications.md). Its Rules judge the transitions (the auto-disable rule, the warning's
// lead, the quiet periods) and shape each notice's and summary's data; package model's
// transactions ask them through model.NoticePolicy, so that each decision commits with its rows.
// And what a person reads: the one line of a chat message and of the portal's list of notices,
// and the headline of a summary. The e-mails built from them are activities/notice.go's.
package notices

import (
	"fmt"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

// Line says notice ev in one line, for a chat and for the portal's list of notices.
func Line(ev *model.Event) string {
	d := model.DecodeNoticeData(ev)
	if ev.EventType == model.NoticeTest {
		return fmt.Sprintf("webhookd: notification endpoint %d: %s", d.WebhookID, d.Message)
	}
	if d.Summary != nil {
		return summaryLine(ev.EventType, d)
	}
	what := map[string]string{
		model.NoticeFailing:   "is failing",
		model.NoticeRecovered: "has recovered: deliveries succeed again",
		model.NoticeDisabling: "will be disabled soon unless a delivery succeeds",
		model.NoticeDisabled:  "was disabled",
		model.NoticeEnabled:   "was enabled again",
		model.NoticeExhausted: fmt.Sprintf("ran out of retries for delivery %d", d.DeliveryID),
	}[ev.EventType]
	var b strings.Builder
	fmt.Fprintf(&b, "webhookd: webhook %d (%s, %s) %s", d.WebhookID, d.URL, d.EventType, what)
	if d.By != "" {
		fmt.Fprintf(&b, " (by %s)", d.By)
	}
	if d.DisableAt != nil {
		fmt.Fprintf(&b, " at %s", d.DisableAt.UTC().Format(time.RFC3339))
	}
	if e := d.LastError; e != nil && ev.EventType != model.NoticeRecovered && ev.EventType != model.NoticeEnabled {
		fmt.Fprintf(&b, "; last error: %s", e.Message)
	}
	if d.Suppressed > 0 {
		fmt.Fprintf(&b, "; %d more failures kept quiet since the last notice", d.Suppressed)
	}
	if d.PortalURL != "" {
		fmt.Fprintf(&b, " %s", d.PortalURL)
	}
	return b.String()
}

// LineNamed is how many webhooks the line of a summary names; the e-mail names every one
// the summary lists.
const LineNamed = 20

// summaryLine says summary d of type t in one line: how many webhooks, since when, the first
// LineNamed of them, and how many more.
func summaryLine(t string, d model.NoticeData) string {
	s := d.Summary
	var b strings.Builder
	fmt.Fprintf(&b, "webhookd: %s since %s: ", Headline(t, s), s.Since.UTC().Format(time.RFC3339))
	for i, e := range s.Listed[:min(len(s.Listed), LineNamed)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (%s, %s)", e.WebhookID, e.URL, e.EventType)
	}
	if more := s.Webhooks - min(len(s.Listed), LineNamed); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	if d.PortalURL != "" {
		fmt.Fprintf(&b, " %s", d.PortalURL)
	}
	return b.String()
}

// Headline says what a summary of type t tells: "49 webhooks moved to failing".
func Headline(t string, s *model.NoticeSummary) string {
	webhooks, were := fmt.Sprintf("%d webhooks", s.Webhooks), "were"
	if s.Webhooks == 1 {
		webhooks, were = "1 webhook", "was"
	}
	switch t {
	case model.NoticeFailing:
		return webhooks + " moved to failing"
	case model.NoticeRecovered:
		return webhooks + " recovered: deliveries succeed again"
	case model.NoticeDisabling:
		return webhooks + " will be disabled soon unless a delivery succeeds"
	case model.NoticeDisabled:
		return webhooks + " " + were + " disabled"
	case model.NoticeEnabled:
		return webhooks + " " + were + " enabled again"
	case model.NoticeExhausted:
		return fmt.Sprintf("%d deliveries of %s ran out of retries", s.Notices, webhooks)
	}
	return webhooks + ": " + t
}
