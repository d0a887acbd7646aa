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
