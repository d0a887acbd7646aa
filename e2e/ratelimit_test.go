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

// TestRateLimitHoldsWithoutFailing: a webhook's rateLimit spaces its deliveries on the real stack,
// at the set rate. A backlog of 30 events published at once reaches the receiver never over the
// limit and not far under it, from the first to the last (each held attempt takes one turn: issue
// 27 saw half the rate), every one
// arrives, the held attempts leave no failed attempt and no status change, and the Web UI names
// what held them.
func TestRateLimitHoldsWithoutFailing(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Minute}})
	id, _ := st.createWebhook(t, "A", st.rc.url("/limited"), "campaign.created")
	const perSecond = 2
	status, body, _ := st.call(t, "A", "PATCH", fmt.Sprintf("%s/webhooks/%d", collection("A"), id), map[string]any{"rateLimit": perSecond})
	if status != http.StatusOK {
		t.Fatalf("set rateLimit: %d %v", status, body)
	}

	const events = 30
	ids := publishAtOnce(t, st, events)
	// Every event, once: at least once allows a second copy (a first attempt a loaded worker ran
	// twice), which counts for neither the events nor the rate.
	var got []receivedRequest
	eventually(t, 3*time.Minute, "every event at the rate-limited receiver", func() bool {
		got = distinctArrivals(st.rc.requests("/limited"))
		return len(got) >= events
	})
	var seen []string
	for _, r := range got {
		seen = append(seen, r.Header.Get("Webhook-Id"))
	}
	for _, e := range ids {
		if !slices.Contains(seen, fmt.Sprintf("msg_%d_%d", e, id)) {
			t.Errorf("event %d never arrived (got %v)", e, seen)
		}
	}
	// The rate the receiver saw, from the first arrival to the last, against the limit set.
	rate, gap := arrivalRate(got)
	t.Logf("%d events at rateLimit %d/s: the receiver saw %.3f/s (%.3f of the limit), largest gap %v", events, perSecond, rate, rate/perSecond, gap)
	// Over the limit breaks the promise. Under it is how close the stack comes, which `make
	// bench-isolation SCENARIO=ratelimit` prints; the bound here is generous, and still fails the
	// half rate issue 27 saw (each held attempt taking two turns).
	if ratio := rate / perSecond; ratio < 0.75 || ratio > 1.05 {
		t.Errorf("the receiver saw %.3f deliveries/s at rateLimit %d: %.3f of the limit, want at most 1.05 and at least 0.75", rate, perSecond, ratio)
	}
	// Each attempt is recorded just after its answer.
	eventually(t, time.Minute, "every attempt recorded", func() bool {
		log, err := st.attempts(id)
		return err == nil && len(log) >= events
	})
	log := st.checkNoFailedAttempt(t, id)
	if len(log) != events {
		t.Fatalf("%d attempts recorded, want %d (one each, none failed)", len(log), events)
	}
	if w := st.webhook(t, id); w.Status != model.StatusProcessing || w.FailureCount != 0 {
		t.Errorf("webhook after held deliveries: status %s, failure count %d; want processing, 0", w.Status, w.FailureCount)
	}
	// The burst's later first attempts were held by the limit: the Web UI's summary of the
	// attempt that followed says so.
	last := ids[len(ids)-1]
	st.waitIdle(t, last, id, model.DeliveryDelivered)
	checkSummaries(t, st, workflows.DeliveryWorkflowID(last, id), "campaign.created to "+strings.TrimPrefix(st.rc.url(""), "https://"), "attempt 1", "attempt 1 (held: endpoint rate limit)")
}

// TestRateLimitChangeRetimesHeldAttempts: a rateLimit changed while a backlog is held applies to
// the held attempts too (docs/api.md: from the next attempt on). Raised from 1/s to 50/s two
// seconds into a burst of 25, the rest arrive at once instead of one a second; lowered from 5/s to
// 1/s three arrivals into a burst of 25, the rest arrive a second apart, from a second after the
// change on (the attempts waiting in the worker read the limit anew once a second). The burst
// outlasts a slow PATCH: with 15 events, a PATCH that took 2 s on a loaded machine left only 4
// arrivals after the change, too few to judge.
func TestRateLimitChangeRetimesHeldAttempts(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Minute}})
	limit := func(id int64, perSecond int) {
		t.Helper()
		status, body, _ := st.call(t, "A", "PATCH", fmt.Sprintf("%s/webhooks/%d", collection("A"), id), map[string]any{"rateLimit": perSecond})
		if status != http.StatusOK {
			t.Fatalf("set rateLimit %d: %d %v", perSecond, status, body)
		}
	}
	type phase struct {
		path       string
		from, to   int
		events     int
		afterFirst int // change the limit once this many arrived
	}
	for _, p := range []phase{{"/raised", 1, 50, 25, 2}, {"/lowered", 5, 1, 25, 3}} {
		t.Run(strings.TrimPrefix(p.path, "/"), func(t *testing.T) {
			id, _ := st.createWebhook(t, "A", st.rc.url(p.path), "campaign.created")
			limit(id, p.from)
			publishAtOnce(t, st, p.events)
			eventually(t, time.Minute, "the first arrivals", func() bool { return len(st.rc.requests(p.path)) >= p.afterFirst })
			changed := time.Now()
			limit(id, p.to)
			eventually(t, 2*time.Minute, "every event at the receiver", func() bool { return len(st.rc.requests(p.path)) >= p.events })
			var after []receivedRequest
			for _, r := range st.rc.requests(p.path) {
				if r.At.After(changed) {
					after = append(after, r)
				}
			}
			if len(after) < 3 {
				t.Fatalf("only %d arrivals after the change", len(after))
			}
			rate, gap := arrivalRate(after)
			ratio := rate / float64(p.from)
			t.Logf("rateLimit %d/s changed to %d/s: the %d arrivals after the change came at %.2f/s (%.2f times the old limit), largest gap %v",
				p.from, p.to, len(after), rate, ratio, gap)
			if p.to > p.from && ratio < 4 {
				t.Errorf("after the limit rose from %d/s to %d/s the held attempts came at %.2f/s, %.2f times the old limit: not re-timed", p.from, p.to, rate, ratio)
			}
			// Lowered: the attempts waiting in the worker for a turn read the limit anew about once
			// a second, so those whose old turn came within that second go at it; the ones after
			// must keep the new limit.
			var later []receivedRequest
			for _, r := range after {
				if r.At.After(changed.Add(1500 * time.Millisecond)) {
					later = append(later, r)
				}
			}
			if p.to < p.from {
				if len(later) < 3 {
					t.Fatalf("only %d arrivals from 1.5 s after the change", len(later))
				}
				if slower, _ := arrivalRate(later); slower > 1.05*float64(p.to) {
					t.Errorf("after the limit fell from %d/s to %d/s the held attempts came at %.2f/s from 1.5 s on, over the new limit: not re-timed", p.from, p.to, slower)
				}
			}
		})
	}
}

// publishAtOnce publishes n campaign.created events on variant A in a burst, one request after
// another (publish fails the test, so it runs on the test's goroutine), and returns their ids.
func publishAtOnce(t *testing.T, st *stack, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = st.publish(t, "A", "campaign.created", campaign)
	}
	return ids
}

// distinctArrivals is reqs without the later copies of a message (same Webhook-Id), in order.
func distinctArrivals(reqs []receivedRequest) []receivedRequest {
	seen := map[string]bool{}
	var out []receivedRequest
	for _, r := range reqs {
		if id := r.Header.Get("Webhook-Id"); !seen[id] {
			seen[id] = true
			out = append(out, r)
		}
	}
	return out
}

// arrivalRate is the rate of reqs (in order of arrival) from the first to the last, and the
// largest gap between two.
func arrivalRate(reqs []receivedRequest) (perSecond float64, gap time.Duration) {
	for i := 1; i < len(reqs); i++ {
		gap = max(gap, reqs[i].At.Sub(reqs[i-1].At))
	}
	span := reqs[len(reqs)-1].At.Sub(reqs[0].At)
	return float64(len(reqs)-1) / span.Seconds(), gap
}
