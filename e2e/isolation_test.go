//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// hangingReceiver accepts HTTPS connections and reads requests but never answers: the receiver
// that, without isolation, holds a worker's delivery slots for a whole timeout each.
type hangingReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	inFlight int
	peak     int
	// held is how long each request the client gave up on was held, arrival to hang-up.
	held []time.Duration
}

func startHangingReceiver(t *testing.T) *hangingReceiver {
	t.Helper()
	h := &hangingReceiver{}
	done := make(chan struct{})
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// Reading the body to its end lets the server notice the client hanging up (it watches
		// the connection only then), so inFlight counts what the client still waits for.
		_, _ = io.Copy(io.Discard, r.Body)
		arrived := time.Now()
		h.mu.Lock()
		h.requests++
		h.inFlight++
		h.peak = max(h.peak, h.inFlight)
		h.mu.Unlock()
		hungUp := false
		select {
		case <-r.Context().Done():
			hungUp = true
		case <-done:
		}
		h.mu.Lock()
		h.inFlight--
		if hungUp {
			h.held = append(h.held, time.Since(arrived))
		}
		h.mu.Unlock()
		// A receiver that never answers sends nothing, not even when its handler ends: returning
		// would let the server write an implicit 200, which a client whose deadline is just
		// passing can still read (TestAttemptTimeoutComesFromTheWorkflowInput once recorded a
		// "200 after 1002 ms" from this receiver). Aborting resets the stream or closes the
		// connection instead.
		panic(http.ErrAbortHandler)
	}))
	h.srv.StartTLS() // httptest's one certificate: the stack's receiver CA file trusts it too
	t.Cleanup(func() {
		close(done)
		h.srv.CloseClientConnections()
		h.srv.Close()
	})
	return h
}

// shortestHold is the shortest time a request was held before the client gave up, and how many
// were.
func (h *hangingReceiver) shortestHold() (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) == 0 {
		return 0, 0
	}
	return slices.Min(h.held), len(h.held)
}

func (h *hangingReceiver) stats() (requests, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, h.peak
}

// as returns the stack acting with another account's API key.
func (st *stack) as(key string) *stack {
	c := *st
	c.key = key
	return &c
}

// TestHangingReceiverDoesNotDelayOthers is the experiment on the real stack: account B has
// 100 webhooks on a receiver that never answers and publishes 10 events (1,000 attempts of 5 s
// each, far more than the worker's 50 slots). Meanwhile account C's events to a healthy receiver
// arrive sooner than any hanging attempt is held, the hanging host never holds more than its cap of
// attempts, and C's webhook records no failed attempt.
func TestHangingReceiverDoesNotDelayOthers(t *testing.T) {
	const hostCap = 8
	st := newStack(t, stackOptions{allowPrivate: true, timeout: 5 * time.Second, schedule: []time.Duration{time.Minute},
		hostConcurrency: hostCap, breakerFailures: 3, breakerCooldown: 10 * time.Second})
	hang := startHangingReceiver(t)
	noisyKey, _, err := model.CreateAPIKey(context.Background(), st.db, "noisy@example.com", "noisy")
	if err != nil {
		t.Fatal(err)
	}
	noisy := st.as(noisyKey)
	for i := range 100 {
		noisy.createWebhook(t, "A", fmt.Sprintf("%s/hang/%d", hang.srv.URL, i), "campaign.created")
	}
	healthy, _ := st.createWebhook(t, "A", st.rc.url("/healthy"), "campaign.created")

	// Event-to-receipt of C's event: from the publish call to the receiver's arrival.
	var events []int64
	receipt := func() time.Duration {
		t.Helper()
		e, d := st.receipt(t, "/healthy", healthy)
		events = append(events, e)
		return d
	}
	idle := receipt()

	for range 10 {
		noisy.publish(t, "A", "campaign.created", campaign)
	}
	eventually(t, 30*time.Second, "the hanging receiver holding attempts", func() bool {
		n, _ := hang.stats()
		return n >= hostCap
	})
	var worst time.Duration
	var under []time.Duration
	for range 5 {
		d := receipt()
		under = append(under, d)
		worst = max(worst, d)
	}
	// Compared within this run, not with a fixed bound: had C's event waited for a slot that a
	// hanging attempt held, it would have arrived no sooner than that attempt was held. So every
	// receipt must be shorter than the shortest hold.
	var hold time.Duration
	var holds int
	eventually(t, 30*time.Second, "hanging attempts timed out", func() bool {
		hold, holds = hang.shortestHold()
		return holds > 0
	})
	t.Logf("healthy event-to-receipt: idle %v; under the hanging load %v; the shortest of %d hanging attempts held %v",
		idle, under, holds, hold)
	if worst >= hold {
		t.Errorf("healthy event-to-receipt under the hanging load reached %v (all: %v), not shorter than a hanging attempt's hold (%v): it waited behind one",
			worst, under, hold)
	}

	requests, peak := hang.stats()
	if peak > hostCap {
		t.Errorf("the hanging host had %d attempts in flight at once, over its cap of %d", peak, hostCap)
	}
	t.Logf("hanging receiver: %d requests, at most %d at once", requests, peak)
	// The breaker judges an endpoint now, not a host: each of B's 100 hanging webhooks needs
	// breakerFailures timeouts of its own before its breaker opens, and at 8 attempts of 5 s at a
	// time that takes minutes, so this test no longer waits for circuit_open (egress's own tests
	// cover the breaker). What it checks instead is the rule that matters to C: a guard never
	// turns C's healthy webhook into a failure, so each of its deliveries is one successful attempt.
	for _, e := range events {
		st.waitIdle(t, e, healthy, model.DeliveryDelivered)
	}
	if log := st.checkNoFailedAttempt(t, healthy); len(log) != len(events) {
		t.Errorf("healthy webhook: %d attempts for %d deliveries, want one each", len(log), len(events))
	}
}

// TestRetryAfterIsHonoured: a 429 or 503 with Retry-After (seconds or an HTTP date) pushes the next
// attempt at least that far, and never beyond the schedule's longest delay.
func TestRetryAfterIsHonoured(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Second, 10 * time.Second}})
	st.rc.setRespond(func(n int, path string, w http.ResponseWriter) {
		if n > 1 {
			return // 200
		}
		switch path {
		case "/seconds":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/date":
			w.Header().Set("Retry-After", time.Now().Add(4*time.Second).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/huge":
			w.Header().Set("Retry-After", "86400")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/ignored": // Retry-After only counts on 429 and 503
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	cases := []struct {
		path     string
		min, max time.Duration // of the wait between the two attempts' starts
	}{
		{"/seconds", 3 * time.Second, 10 * time.Second},
		{"/date", 2 * time.Second, 10 * time.Second}, // HTTP dates have whole seconds
		{"/huge", time.Second, 11 * time.Second},     // capped at the longest delay, 10s (+10% jitter)
		{"/ignored", time.Second, 3 * time.Second},   // the schedule's 1s (+10%), plus slack
	}
	ids := map[string]int64{}
	for _, c := range cases {
		ids[c.path], _ = st.createWebhook(t, "A", st.rc.url(c.path), "campaign.created")
	}
	eventID := st.publish(t, "A", "campaign.created", campaign)
	for _, c := range cases {
		eventually(t, 60*time.Second, c.path+" delivered", func() bool {
			return st.delivery(t, eventID, ids[c.path]).State == model.DeliveryDelivered
		})
		var log []model.Attempt
		if err := st.db.NewSelect().Model(&log).Where("delivery_id = ?", st.delivery(t, eventID, ids[c.path]).ID).
			OrderExpr("attempt").Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(log) != 2 {
			t.Fatalf("%s: %d attempts, want 2", c.path, len(log))
		}
		gap := log[1].StartedAt.Sub(log[0].StartedAt)
		if gap < c.min || gap > c.max {
			t.Errorf("%s: second attempt %v after the first, want within [%v, %v]", c.path, gap, c.min, c.max)
		}
	}
}

// TestAutoDisable: a webhook that fails without a success for longer than the disable period, with
// enough exhausted deliveries, is disabled once, and its owner gets one disable e-mail. Deliveries
// of a disabled webhook post nothing and wait; enabling it replays nothing, new events flow again,
// and a manual retry delivers what was held.
func TestAutoDisable(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond},
		disable: notices.DisableRule{After: time.Second, MinExhausted: 3}})
	var healthy sync.Map // path -> true once the receiver is fixed
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if _, ok := healthy.Load(path); !ok {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	id, _ := st.createWebhook(t, "B", st.rc.url("/dead"), "lead.captured")
	var events []int64
	eventually(t, 60*time.Second, "the webhook disabled", func() bool {
		if st.webhook(t, id).DisabledAt != nil {
			return true
		}
		e := st.publish(t, "B", "lead.captured", sampleData["lead.captured"])
		events = append(events, e)
		st.waitIdle(t, e, id, model.DeliveryExhausted)
		return false
	})
	w := st.webhook(t, id)
	if w.Status != model.StatusDisabled || w.DisabledReason == nil || *w.DisabledReason != "auto" {
		t.Fatalf("webhook after auto-disable: status %s, reason %v", w.Status, w.DisabledReason)
	}

	// Nothing more reaches the receiver: a new event is held without an attempt.
	posted := len(st.rc.requests("/dead"))
	held := st.publish(t, "B", "lead.captured", sampleData["lead.captured"])
	st.waitIdle(t, held, id, model.DeliveryExhausted)
	if d := st.delivery(t, held, id); d.Attempts != 0 || d.LastError == nil || !strings.Contains(*d.LastError, "disabled") {
		t.Errorf("delivery to the disabled webhook = %+v, want exhausted without attempts, naming the reason", d)
	}
	if n := len(st.rc.requests("/dead")); n != posted {
		t.Errorf("the disabled webhook's receiver got %d more requests", n-posted)
	}

	// One failing e-mail (the test event) and one disable e-mail, however many deliveries exhausted.
	eventually(t, 30*time.Second, "the disable e-mail", func() bool { return countMail(t, st, "is disabled") == 1 })
	if n := countMail(t, st, "is disabled"); n != 1 {
		t.Errorf("%d disable e-mails, want 1", n)
	}
	if n := countMail(t, st, "is failing"); n != 1 {
		t.Errorf("%d failing e-mails, want 1", n)
	}

	// Enable: nothing is replayed, new events are delivered.
	healthy.Store("/dead", true)
	status, body, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/webhooks/%d/enable", id), nil)
	if status != http.StatusOK || body["data"].(map[string]any)["status"] != model.StatusActive {
		t.Fatalf("enable: %d %v", status, body)
	}
	fresh := st.publish(t, "B", "lead.captured", sampleData["lead.captured"])
	st.waitIdle(t, fresh, id, model.DeliveryDelivered)
	st.waitIdle(t, held, id, model.DeliveryExhausted)
	if n := len(st.rc.requests("/dead")); n != posted+1 {
		t.Errorf("after enabling, the receiver got %d requests, want 1 (the new event; no replay)", n-posted)
	}

	// The manual retry replays what failed or was held.
	status, body, _ = st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/webhooks/%d/retry", id), nil)
	if status != http.StatusAccepted {
		t.Fatalf("retry: %d %v", status, body)
	}
	for _, e := range append(events, held) {
		st.waitIdle(t, e, id, model.DeliveryDelivered)
	}
}

// TestDisableStopsPendingRetries: a delivery waiting for its next attempt when its webhook is
// disabled makes no further attempt.
func TestDisableStopsPendingRetries(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{2 * time.Second, 2 * time.Second}})
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	id, _ := st.createWebhook(t, "A", st.rc.url("/failing"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "the first attempt", func() bool { return st.delivery(t, eventID, id).Attempts == 1 })
	status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/disable", id), nil)
	if status != http.StatusOK || body["data"].(map[string]any)["disabled"] != true {
		t.Fatalf("disable: %d %v", status, body)
	}
	st.waitIdle(t, eventID, id, model.DeliveryExhausted)
	if n := len(st.rc.requests("/failing")); n != 1 {
		t.Errorf("the receiver got %d requests, want 1 (none after the disable)", n)
	}
	// The owner is told who disabled it (webhook.disabled, by the API), once.
	eventually(t, 30*time.Second, "the webhook.disabled notice", func() bool { return countMail(t, st, "disabled") >= 1 })
	if n := countMail(t, st, "webhook.disabled"); n != 1 {
		t.Errorf("%d e-mails about a disable the owner made, want one webhook.disabled", n)
	}
	for _, m := range st.mb.Messages() {
		if text := m.Text(t); strings.Contains(text, "webhook.disabled") && !strings.Contains(text, "(by api)") {
			t.Errorf("the disable e-mail does not say the API did it:\n%s", text)
		}
	}
}

func countMail(t *testing.T, st *stack, subject string) int {
	t.Helper()
	n := 0
	for _, m := range st.mb.Messages() {
		if strings.Contains(strings.SplitN(m.Text(t), "\n", 2)[0], subject) {
			n++
		}
	}
	return n
}
