package workflows_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestDeliveryWorkflowRetriesOnTheirOwnQueue: the first attempt runs on the workflow's task queue
// and every later one, including those after a manual retry, on the retry queue, whose worker has
// its own slots.
func TestDeliveryWorkflowRetriesOnTheirOwnQueue(t *testing.T) {
	h := newHarness(t)
	in := input("website.published")
	in.RetryTaskQueue = "retries"
	h.signalRetryAt(8 * time.Hour) // after exhaustion at 7h21m
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		if in.Attempt == 7 {
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	st := h.run(in)

	if st.State != model.DeliveryDelivered || len(h.delivers) != 7 {
		t.Fatalf("result %+v after %d attempts, want delivered on attempt 7", st, len(h.delivers))
	}
	if first := h.delivers[0].queue; first == "retries" || first == "" {
		t.Errorf("attempt 1 ran on %q, want the workflow's own queue", first)
	}
	for _, c := range h.delivers[1:] {
		if c.queue != "retries" {
			t.Errorf("attempt %d ran on %q, want retries", c.in.Attempt, c.queue)
		}
	}
}

// TestDeliveryWorkflowJitter: with Jitter set, each wait is the schedule's delay plus at most that
// fraction of it, the activity is told the same wait it records, and two deliveries that failed
// together come back at different times.
func TestDeliveryWorkflowJitter(t *testing.T) {
	offsets := map[int64][]time.Duration{}
	for _, id := range []int64{11, 12} {
		h := newHarness(t)
		in := input("website.published")
		in.DeliveryID, in.Jitter = id, 0.1
		h.run(in)
		if len(h.delivers) != 6 {
			t.Fatalf("delivery %d: %d attempts, want 6", id, len(h.delivers))
		}
		for i := 1; i < len(h.delivers); i++ {
			gap := h.delivers[i].at - h.delivers[i-1].at
			d := defaultSchedule[i-1]
			if gap < d || gap >= d+d/10 {
				t.Errorf("delivery %d: wait before attempt %d = %v, want within [%v, %v)", id, i+1, gap, d, d+d/10)
			}
			if told := h.delivers[i-1].in.NextAttemptIn; told != gap {
				t.Errorf("delivery %d: attempt %d was told the next comes in %v, it came after %v", id, i, told, gap)
			}
		}
		offsets[id] = h.deliverOffsets()
	}
	if slices.Equal(offsets[11], offsets[12]) {
		t.Errorf("deliveries 11 and 12 retried at the same offsets %v: no jitter between them", offsets[11])
	}
}

// TestJitteredDelayBounds: over many deliveries and attempts the added fraction stays in [0, jitter)
// and is spread over that range, not bunched at one end.
func TestJitteredDelayBounds(t *testing.T) {
	const d = time.Minute
	lo, hi, sum, n := time.Duration(1<<62), time.Duration(0), 0.0, 0
	for id := int64(1); id <= 2000; id++ {
		for attempt := 1; attempt <= 6; attempt++ {
			got := workflows.JitteredDelay(d, 0.1, id, attempt)
			if got < d || got >= d+d/10 {
				t.Fatalf("JitteredDelay(1m, 0.1, %d, %d) = %v, want within [1m, 1m6s)", id, attempt, got)
			}
			lo, hi = min(lo, got), max(hi, got)
			sum += float64(got-d) / float64(d)
			n++
		}
	}
	if lo > d+d/200 || hi < d+d/10-d/200 {
		t.Errorf("jittered delays span [%v, %v], want close to the whole [1m, 1m6s)", lo, hi)
	}
	if mean := sum / float64(n); mean < 0.045 || mean > 0.055 {
		t.Errorf("mean added fraction = %.4f, want about 0.05 (uniform over [0, 0.1))", mean)
	}
	if got := workflows.JitteredDelay(d, 0, 7, 1); got != d {
		t.Errorf("zero jitter changed the delay to %v", got)
	}
}

// TestDeliveryWorkflowHonoursRetryAfter: when an attempt asks for a longer wait (the activity saw
// Retry-After on a 429 or 503), the next attempt waits that long; a shorter ask does not bring the
// schedule forward.
func TestDeliveryWorkflowHonoursRetryAfter(t *testing.T) {
	h := newHarness(t)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		res := failed(in.Attempt, h.env.Now())
		switch in.Attempt {
		case 1:
			res.NextAttemptIn = 3 * time.Minute // the schedule says 1m
		case 2:
			res.NextAttemptIn = time.Second // the schedule says 5m
		}
		return res, nil
	}
	in := input("website.published")
	h.run(in)

	if len(h.delivers) < 3 {
		t.Fatalf("%d attempts, want 6", len(h.delivers))
	}
	if got, want := h.delivers[1].at, 3*time.Minute; got != want {
		t.Errorf("attempt 2 at %v, want %v (Retry-After over the 1m delay)", got, want)
	}
	if got, want := h.delivers[2].at-h.delivers[1].at, 5*time.Minute; got != want {
		t.Errorf("wait before attempt 3 = %v, want the scheduled %v", got, want)
	}
	for _, c := range h.delivers {
		if c.in.MaxRetryDelay != 6*time.Hour {
			t.Errorf("attempt %d: MaxRetryDelay = %v, want the schedule's longest delay 6h", c.in.Attempt, c.in.MaxRetryDelay)
		}
	}
}

// TestDeliveryWorkflowHostBusy: a regular attempt held back at a busy receiver (its turn is
// further out than it may wait in the worker) is the same delivery attempt, made again once, when
// the turn the worker booked for it comes, after a durable timer: the schedule is untouched.
func TestDeliveryWorkflowHostBusy(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		calls++
		switch calls {
		case 1:
			return failed(in.Attempt, h.env.Now()), nil
		case 2:
			return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "held back", RetryIn: 7 * time.Second}, nil
		}
		return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
	}
	st := h.run(input("website.published"))

	if got, want := h.deliverOffsets(), []time.Duration{0, time.Minute, time.Minute + 7*time.Second}; !slices.Equal(got, want) {
		t.Errorf("activity ran at %v, want %v (the turn the busy host booked)", got, want)
	}
	if got := h.attemptNumbers(); !slices.Equal(got, []int{1, 2, 2}) {
		t.Errorf("delivery attempt numbers = %v, want the held attempt 2 made again as 2", got)
	}
	if st.State != model.DeliveryDelivered || st.Attempts != 2 {
		t.Errorf("result = %+v, want delivered on attempt 2", st)
	}
}

// TestDeliveryWorkflowLimitsSignalEndsTheWait: a held attempt's wait for its turn ends at a limits
// signal (its webhook's limits changed), and the attempt comes back at once for a turn under them:
// a first attempt's (held by the local activity with a turn an hour away, it sleeps before it is
// handed back), and a regular attempt's.
func TestDeliveryWorkflowLimitsSignalEndsTheWait(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  int             // how many asks are held back for an hour
		local time.Duration   // the local first attempt's turn, when not an hour away
		want  []time.Duration // when the activity ran
	}{
		{name: "first attempt", held: 1, want: []time.Duration{0, 10 * time.Second}},
		{name: "handed back", held: 2, local: time.Second, want: []time.Duration{0, 0, 10 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			calls := 0
			h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
				calls++
				switch {
				case calls == 1 && tc.local > 0:
					return activities.DeliverResult{HostBusy: true, HeldBy: "rate_limit", Error: "held back", RetryIn: tc.local}, nil
				case calls <= tc.held:
					return activities.DeliverResult{HostBusy: true, HeldBy: "rate_limit", Error: "held back", RetryIn: time.Hour}, nil
				}
				return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
			}
			h.at(10*time.Second, func() { h.env.SignalWorkflow(workflows.SignalLimits, nil) })
			st := h.run(input("website.published"))

			if got := h.deliverOffsets(); !slices.Equal(got, tc.want) {
				t.Errorf("activity ran at %v, want %v (back at the signal)", got, tc.want)
			}
			if st.State != model.DeliveryDelivered || st.Attempts != 1 {
				t.Errorf("result = %+v, want delivered on attempt 1", st)
			}
		})
	}
}

// TestDeliveryWorkflowLocalAttemptHandsBackBusyHost: a local first attempt that finds its host at
// its cap hands the attempt back at once (it would hold its workflow task while it waited), and
// the workflow makes the same attempt as a regular activity, which, held back in turn, comes back
// at the turn it was given.
func TestDeliveryWorkflowLocalAttemptHandsBackBusyHost(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		calls++
		if calls <= 2 {
			return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "held back", RetryIn: 7 * time.Second}, nil
		}
		return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
	}
	in := input("website.published")
	in.RetryTaskQueue = "webhookd-retry"
	st := h.run(in)

	var kinds []string
	for _, c := range h.delivers {
		kinds = append(kinds, fmt.Sprintf("%d:local=%v@%v", c.in.Attempt, c.local, c.at))
	}
	if want := []string{"1:local=true@0s", "1:local=false@0s", "1:local=false@7s"}; !slices.Equal(kinds, want) {
		t.Errorf("attempts %v, want %v", kinds, want)
	}
	if st.State != model.DeliveryDelivered || st.Attempts != 1 || len(h.exhausted) != 0 {
		t.Errorf("result = %+v, want delivered on attempt 1", st)
	}
}

// TestDeliveryWorkflowWebhookDisabled: an attempt that finds the webhook disabled posts nothing
// and stops the schedule without a new exhaustion or alert; the delivery waits for a manual retry
// like an exhausted one, and runs again when it comes.
func TestDeliveryWorkflowWebhookDisabled(t *testing.T) {
	h := newHarness(t)
	disabled := true
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		switch {
		case in.Attempt == 2 && disabled:
			return activities.DeliverResult{WebhookDisabled: true, Error: "the webhook is disabled"}, nil
		case in.Attempt == 3:
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	var during workflows.DeliveryState
	h.at(time.Hour, func() { during = h.query() })
	h.at(2*time.Hour, func() { disabled = false })
	h.signalRetryAt(2 * time.Hour)
	st := h.run(input("website.published"))

	if got, want := h.deliverOffsets(), []time.Duration{0, time.Minute, 2 * time.Hour}; !slices.Equal(got, want) {
		t.Errorf("attempts at %v, want %v (none after the disabled one until the retry)", got, want)
	}
	if during.State != model.DeliveryExhausted || during.NextAttemptAt != nil || during.LastError != "the webhook is disabled" {
		t.Errorf("state while disabled = %s, want exhausted with the disabled error and no next attempt", fmtState(during))
	}
	if len(h.exhausted) != 0 || len(h.notices) != 0 {
		t.Errorf("MarkExhausted called %d times, notices started %d times; want neither", len(h.exhausted), len(h.notices))
	}
	if st.State != model.DeliveryDelivered || st.Attempts != 3 {
		t.Errorf("result = %+v, want delivered on attempt 3", st)
	}
}

// TestDeliveryWorkflowDisableAlert: when the exhaustion disabled the webhook, the owner gets the
// disable alert, once.
func TestDeliveryWorkflowDisableAlert(t *testing.T) {
	h := newHarness(t)
	h.alert, h.disable = false, true
	h.run(input("website.published"))

	if len(h.notices) != 1 || h.notices[0].in != 77 {
		t.Errorf("notices started = %+v, want the disable's notice 77", h.notices)
	}
}
