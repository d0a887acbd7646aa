package notices

import (
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

// Rules are how the service judges and shapes notices (docs/notifications.md). They are the
// model.NoticePolicy that model's transactions consult, so that each decision commits with the
// rows it judges.
type Rules struct {
	// Disable is the auto-disable rule.
	Disable DisableRule
	// WarnBefore is how long before the rule would disable a webhook that webhook.disabling
	// goes, at the first exhausted delivery within it; at most half of Disable.After. Zero warns
	// never.
	WarnBefore time.Duration
	// Quiet is the storm rule: after a webhook.failing and webhook.recovered pair, no
	// webhook.failing for Quiet; transitions meanwhile are summarised by the next notice. It is
	// also the account rule's quiet period (model.EndAccountQuietPeriods).
	Quiet time.Duration
	// PublicURL, when set, is where the portal is served: notices link to the webhook's page.
	PublicURL string
}

// DisableRule says when exhausted deliveries disable their webhook: once it has failed without a
// single success for After, and at least MinExhausted of its deliveries were exhausted since its
// last success. A zero After never disables. The service's defaults are 120h (5 days) and 5
// (WEBHOOKD_DISABLE_AFTER, WEBHOOKD_DISABLE_MIN_EXHAUSTED).
type DisableRule struct {
	After        time.Duration
	MinExhausted int
}

// DisableAt is when the rule would disable w: FailingSince + After, once at least MinExhausted of
// its deliveries were exhausted since it began failing. The rule is judged when a delivery is
// exhausted (model.MarkExhausted), so the webhook is disabled at the first exhaustion from then
// on, and a time already past means the next exhausted delivery disables it. Nil when the rule
// does not apply: it is off (After zero), w is not failing, fewer than MinExhausted deliveries
// were exhausted, or w is disabled already.
func (r DisableRule) DisableAt(w *model.Webhook) *time.Time {
	if r.After <= 0 || w.Disabled() || w.FailingSince == nil || w.ExhaustedCount < r.MinExhausted {
		return nil
	}
	at := w.FailingSince.Add(r.After)
	return &at
}

// QuietPeriod is the length of the storm rule's and the account rule's quiet periods.
func (r Rules) QuietPeriod() time.Duration { return r.Quiet }

// DisableLimits is the auto-disable rule as an exhaustion's compare-and-set applies it, with the
// warning's lead: WarnBefore, at most half of Disable.After, and negative when it warns never.
func (r Rules) DisableLimits() (after time.Duration, minExhausted int, warnLead time.Duration) {
	warnLead = -1
	if r.WarnBefore > 0 {
		warnLead = min(r.WarnBefore, r.Disable.After/2)
	}
	return r.Disable.After, r.Disable.MinExhausted, warnLead
}

// NoticeData is notice n's data, recorded at: the webhook as the transition left it, what the
// transition says, and the link to the webhook's page in the portal (none for a notification
// endpoint, which has no page).
func (r Rules) NoticeData(n model.Notice, at time.Time) model.NoticeData {
	w := n.Webhook
	d := model.NoticeData{
		AccountID: w.AccountID, Variant: w.Variant, WebhookID: w.ID, URL: w.URL, EventType: w.EventType, Status: w.Status,
		At: at.UTC(), LastError: n.LastError, FailureCount: w.FailureCount, FailingSince: w.FailingSince,
		By: n.By, DisableAt: n.DisableAt, DeliveryID: n.DeliveryID, EventID: n.EventID, Suppressed: n.Suppressed,
	}
	if w.IsChannel() {
		d.Channel = w.Kind
	}
	if r.PublicURL != "" && !w.IsChannel() {
		d.PortalURL = r.webhookPage(w.ID)
	}
	return d
}

// SummaryData is the data of summary s, of the account's notices in variant v, recorded at: the
// fields of a notice describe the first webhook it names, and it links to the portal, and each
// webhook it names to its page.
func (r Rules) SummaryData(accountID int64, v model.Variant, s *model.NoticeSummary, at time.Time) model.NoticeData {
	first := s.Listed[0]
	d := model.NoticeData{AccountID: accountID, Variant: v, WebhookID: first.WebhookID, URL: first.URL, EventType: first.EventType,
		Status: first.Status, At: at.UTC(), LastError: first.LastError, Summary: s}
	if r.PublicURL != "" {
		d.PortalURL = strings.TrimSuffix(r.PublicURL, "/") + "/portal/"
		for i := range s.Listed {
			s.Listed[i].PortalURL = r.webhookPage(s.Listed[i].WebhookID)
		}
	}
	return d
}

// webhookPage is the address of webhook id's page in the portal.
func (r Rules) webhookPage(id int64) string {
	return strings.TrimSuffix(r.PublicURL, "/") + "/portal/webhooks/" + strconv.FormatInt(id, 10)
}
