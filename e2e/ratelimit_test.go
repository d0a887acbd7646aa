//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRateLimitHoldsWithoutFailing: a webhook's rateLimit spaces its deliveries on the real stack.
// A burst of events reaches the receiver no faster than the limit, every one arrives, the held
// attempts leave no failed attempt and no status change, and the Web UI names what held them.
func TestRateLimitHoldsWithoutFailing(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Minute}})
	id, _ := st.createWebhook(t, "A", st.rc.url("/limited"), "campaign.created")
	const perSecond = 2
	status, body, _ := st.call(t, "A", "PATCH", fmt.Sprintf("%s/webhooks/%d", collection("A"), id), map[string]any{"rateLimit": perSecond})
	if status != http.StatusOK {
		t.Fatalf("set rateLimit: %d %v", status, body)
	}

	const events = 6
	var ids []int64
	for range events {
		ids = append(ids, st.publish(t, "A", "campaign.created", campaign))
	}
	eventually(t, 60*time.Second, "every event at the rate-limited receiver", func() bool {
		return len(st.rc.requests("/limited")) >= events
	})
	got := st.rc.requests("/limited")
	var seen []string
	for _, r := range got {
		seen = append(seen, r.Header.Get("Webhook-Id"))
	}
	for _, e := range ids {
		if !slices.Contains(seen, fmt.Sprintf("msg_%d_%d", e, id)) {
			t.Errorf("event %d never arrived (got %v)", e, seen)
		}
	}
	// The limit spaces the attempts' turns: each turn comes at least one interval after the one
	// before, counted from the first attempt's. So the attempts' starts span at least
	// (events-1) intervals; a slow machine can only widen that. (The receipts' own gaps also carry
	// each exchange's connection time, which varies, so they are not compared one by one.)
	log := st.checkNoFailedAttempt(t, id)
	if len(log) != events {
		t.Fatalf("%d attempts recorded, want %d (one each, none failed)", len(log), events)
	}
	interval := time.Second / perSecond
	span := log[len(log)-1].StartedAt.Sub(log[0].StartedAt)
	if want := time.Duration(events-1)*interval - 50*time.Millisecond; span < want {
		t.Errorf("%d attempts started within %v, want at least %v at %d/s", events, span, want, perSecond)
	}
	t.Logf("%d attempts at rateLimit %d/s started over %v", events, perSecond, span)

	if w := st.webhook(t, id); w.Status != model.StatusProcessing || w.FailureCount != 0 {
		t.Errorf("webhook after held deliveries: status %s, failure count %d; want processing, 0", w.Status, w.FailureCount)
	}
	// The burst's later first attempts were held by the limit: the Web UI's summary of the
	// attempt that followed says so.
	last := ids[len(ids)-1]
	st.waitIdle(t, last, id, model.DeliveryDelivered)
	checkSummaries(t, st, workflows.DeliveryWorkflowID(last, id), "campaign.created to "+strings.TrimPrefix(st.rc.url(""), "https://"), "attempt 1", "attempt 1 (held: endpoint rate limit)")
}
