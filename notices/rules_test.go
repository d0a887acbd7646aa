package notices_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// TestDisableAt: the rule's time is failing_since + After once enough deliveries were exhausted,
// and there is none when the rule is off, the webhook is not failing, too few were exhausted, or
// it is disabled already.
func TestDisableAt(t *testing.T) {
	since := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	rule := notices.DisableRule{After: 120 * time.Hour, MinExhausted: 2}
	disabled := since.Add(time.Hour)
	for _, c := range []struct {
		name string
		rule notices.DisableRule
		w    model.Webhook
		want string
	}{
		{"failing, enough exhausted", rule, model.Webhook{FailingSince: &since, ExhaustedCount: 2}, "2026-11-25 08:00:00 +0000 UTC"},
		{"too few exhausted", rule, model.Webhook{FailingSince: &since, ExhaustedCount: 1}, "<nil>"},
		{"not failing", rule, model.Webhook{ExhaustedCount: 3}, "<nil>"},
		{"rule off", notices.DisableRule{MinExhausted: 2}, model.Webhook{FailingSince: &since, ExhaustedCount: 2}, "<nil>"},
		{"disabled", rule, model.Webhook{FailingSince: &since, ExhaustedCount: 2, DisabledAt: &disabled}, "<nil>"},
	} {
		if got := c.rule.DisableAt(&c.w); fmt.Sprint(deref(got)) != c.want {
			t.Errorf("%s: DisableAt = %v, want %s", c.name, deref(got), c.want)
		}
	}
}

func deref(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

// TestDisableLimits: the warning goes WarnBefore ahead of the disable, at most half of After
// ahead, and never when WarnBefore is zero.
func TestDisableLimits(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules notices.Rules
		lead  time.Duration
	}{
		{"WarnBefore", notices.Rules{Disable: notices.DisableRule{After: 10 * time.Hour, MinExhausted: 3}, WarnBefore: 4 * time.Hour}, 4 * time.Hour},
		{"at most half of After", notices.Rules{Disable: notices.DisableRule{After: 10 * time.Hour, MinExhausted: 3}, WarnBefore: 48 * time.Hour}, 5 * time.Hour},
		{"never", notices.Rules{Disable: notices.DisableRule{After: 10 * time.Hour, MinExhausted: 3}}, -1},
	} {
		after, minExhausted, lead := c.rules.DisableLimits()
		if after != c.rules.Disable.After || minExhausted != c.rules.Disable.MinExhausted || (lead < 0) != (c.lead < 0) || (c.lead >= 0 && lead != c.lead) {
			t.Errorf("%s: DisableLimits = %v, %d, %v; want %v, %d, %v", c.name, after, minExhausted, lead, c.rules.Disable.After, c.rules.Disable.MinExhausted, c.lead)
		}
	}
}

// TestNoticeLinks: a notice about a webhook links to its page in the portal, one about a
// notification endpoint (which has no page) names its kind instead, and a summary links to the
// portal and each webhook it names to its page; without a PublicURL nothing links.
func TestNoticeLinks(t *testing.T) {
	at := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	r := notices.Rules{PublicURL: "https://hooks.example.com/"}
	hook := &model.Webhook{ID: 7, AccountID: 1, Variant: model.VariantA, Kind: model.KindWebhook, URL: "https://r.example.com/"}
	if d := r.NoticeData(model.Notice{Type: model.NoticeFailing, Webhook: hook}, at); d.PortalURL != "https://hooks.example.com/portal/webhooks/7" || d.Channel != "" || d.WebhookID != 7 || !d.At.Equal(at) {
		t.Errorf("notice about a webhook: %+v", d)
	}
	chat := &model.Webhook{ID: 8, AccountID: 1, Variant: model.VariantA, Kind: model.KindNoticeChat, URL: "https://chat.example.com/"}
	if d := r.NoticeData(model.Notice{Type: model.NoticeFailing, Webhook: chat}, at); d.PortalURL != "" || d.Channel != model.KindNoticeChat {
		t.Errorf("notice about a channel: %+v", d)
	}
	if d := (notices.Rules{}).NoticeData(model.Notice{Type: model.NoticeFailing, Webhook: hook}, at); d.PortalURL != "" {
		t.Errorf("notice without a PublicURL links to %q", d.PortalURL)
	}
	s := &model.NoticeSummary{Notices: 3, Webhooks: 2, Listed: []model.SummaryWebhook{{WebhookID: 7, URL: "https://r.example.com/", Status: "failed"}, {WebhookID: 9}}}
	d := r.SummaryData(1, model.VariantA, s, at)
	if d.PortalURL != "https://hooks.example.com/portal/" || d.WebhookID != 7 || d.URL != "https://r.example.com/" || d.Status != "failed" || d.Summary != s {
		t.Errorf("summary: %+v", d)
	}
	if s.Listed[0].PortalURL != "https://hooks.example.com/portal/webhooks/7" || s.Listed[1].PortalURL != "https://hooks.example.com/portal/webhooks/9" {
		t.Errorf("summary's webhooks link to %q, %q", s.Listed[0].PortalURL, s.Listed[1].PortalURL)
	}
}
