package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// start is the workflow's start time in every test; offsets are measured from it.
var start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

const retryWindow = 7 * 24 * time.Hour

// scheduleOffsets are the attempt times of the default schedule (spec 6.4): the first attempt at
// once, then the cumulative delays.
var scheduleOffsets = []time.Duration{0, time.Minute, 6 * time.Minute, 21 * time.Minute, 81 * time.Minute, 441 * time.Minute}

// defaultSchedule is the delay before each retry: 1m, 5m, 15m, 1h, 6h (spec 6.4), the
// default of WEBHOOKD_RETRY_SCHEDULE.
var defaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}

// testWebhookID is the webhook of input's deliveries.
const testWebhookID = 33

// defaultJitter is the default of WEBHOOKD_RETRY_JITTER: up to 10% added to each retry delay.
const defaultJitter = 0.1

func input(eventType string) workflows.DeliveryInput {
	return workflows.DeliveryInput{
		DeliveryID: 11, EventID: 22, WebhookID: testWebhookID, Variant: model.VariantB, EventType: eventType,
		Schedule: defaultSchedule, RetryWindow: retryWindow, AttemptTimeout: 10 * time.Second,
		RetryTaskQueue: "webhookd-retry",
	}
}

// failed is what Deliver returns for a receiver that answered 500. Each attempt's error text is
// distinct so a test can tell which attempt's error reached MarkExhausted and the query.
func failed(attempt int, at time.Time) activities.DeliverResult {
	return activities.DeliverResult{StatusCode: 500, ErrorClass: activities.ClassHTTPStatus,
		Error: fmt.Sprintf("receiver answered 500 (attempt %d)", attempt), AttemptedAt: at}
}

type deliverCall struct {
	at    time.Duration // since start, in workflow time
	in    activities.DeliverInput
	queue string // the task queue the attempt ran on
	local bool   // run as a local activity
	// startToClose is the attempt's StartToClose, as the workflow scheduled it (the deadline it
	// gave the activity).
	startToClose time.Duration
}

type timedCall[T any] struct {
	at time.Duration
	in T
}

// harness runs DeliveryWorkflow in a TestWorkflowEnvironment with the three activities mocked,
// recording every call and the workflow time it happened at.
type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	// deliver decides each attempt's outcome; it sees the attempt number and the activity's own
	// (Temporal) attempt. Default: every attempt fails.
	deliver func(in activities.DeliverInput, activityAttempt int32) (activities.DeliverResult, error)
	// alert and disable are what MarkExhausted answers (with the notice 77 when either is set);
	// startErr what StartEventDeliveries returns.
	alert    bool
	disable  bool
	startErr error
	// webhookGone is what CancelIfWebhookGone answers when the retry window closes.
	webhookGone bool

	// deliverMock is Deliver's mock, for a test to give attempts a duration with After.
	deliverMock *testsuite.MockCallWrapper

	mu        sync.Mutex // mock callbacks run outside the workflow goroutine
	delivers  []deliverCall
	exhausted []timedCall[activities.ExhaustedInput]
	notices   []timedCall[int64] // the notices whose deliveries the workflow started
	settled   []string           // the states SettleClaim gave back
	states    []string           // DeliveryState search attribute values, in upsert order
	advanced  []workflows.AdvanceLaneInput
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger(t))
	h := &harness{t: t, env: suite.NewTestWorkflowEnvironment(), alert: true}
	// dispatch's activity, which workflows call by name; registered before any mock.
	h.env.RegisterActivityWithOptions(func(context.Context, int64) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityStartEventDeliveries})
	h.env.RegisterActivityWithOptions(func(_ context.Context, in workflows.AdvanceLaneInput) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.advanced = append(h.advanced, in)
		return nil
	}, activity.RegisterOptions{Name: workflows.ActivityAdvanceLane})
	h.env.SetStartTime(start)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		return failed(in.Attempt, h.env.Now()), nil
	}

	var a *activities.Activities
	h.deliverMock = h.env.OnActivity(a.Deliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.DeliverInput) (activities.DeliverResult, error) {
			h.mu.Lock()
			info := activity.GetInfo(ctx)
			h.delivers = append(h.delivers, deliverCall{at: h.since(), in: in, queue: info.TaskQueue, local: info.IsLocalActivity,
				startToClose: info.Deadline.Sub(info.StartedTime)})
			h.mu.Unlock()
			return h.deliver(in, activity.GetInfo(ctx).Attempt)
		})
	h.env.OnActivity(a.MarkExhausted, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ExhaustedInput) (activities.ExhaustedResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.exhausted = append(h.exhausted, timedCall[activities.ExhaustedInput]{h.since(), in})
			res := activities.ExhaustedResult{Alert: h.alert, Disabled: h.disable}
			if h.alert || h.disable {
				res.Notices = []int64{77}
			}
			return res, nil
		})
	h.env.OnActivity(workflows.ActivityStartEventDeliveries, mock.Anything, mock.Anything).Return(
		func(_ context.Context, id int64) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.notices = append(h.notices, timedCall[int64]{h.since(), id})
			return h.startErr
		})
	h.env.OnActivity(a.SettleClaim, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SettleInput) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.settled = append(h.settled, in.State)
			return nil
		}).Maybe()
	// The webhook is still there when the retry window closes (TestDeliveryWorkflowWindowEnd
	// deletes it).
	h.env.OnActivity(a.CancelIfWebhookGone, mock.Anything, mock.Anything).Return(
		func(context.Context, int64) (bool, error) { return h.webhookGone, nil }).Maybe()
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		v, ok := sa.GetKeyword(workflows.AttrDeliveryState)
		h.mu.Lock()
		defer h.mu.Unlock()
		// The run starts without search attributes (as dispatch starts it): the first upsert sets
		// them all, the later ones DeliveryState only.
		want := 1
		if len(h.states) == 0 {
			want = len(workflows.SearchAttributes)
			if id, _ := sa.GetInt64(workflows.AttrWebhookID); id != testWebhookID {
				t.Errorf("first upsert: WebhookId %d, want %d", id, testWebhookID)
			}
		}
		if !ok || sa.Size() != want {
			t.Errorf("upsert %d: search attributes %v, want %d with DeliveryState", len(h.states)+1, sa.GetUntypedValues(), want)
		}
		h.states = append(h.states, v)
	}).Return()
	return h
}

func (h *harness) since() time.Duration { return h.env.Now().Sub(start) }

// at runs f at workflow time offset d.
func (h *harness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

func (h *harness) signalRetryAt(d time.Duration) {
	h.at(d, func() { h.env.SignalWorkflow(workflows.SignalRetry, nil) })
}

func (h *harness) query() workflows.DeliveryState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryState)
	if err != nil {
		h.t.Fatalf("query %s: %v", workflows.QueryState, err)
	}
	var st workflows.DeliveryState
	if err := v.Get(&st); err != nil {
		h.t.Fatalf("decode %s: %v", workflows.QueryState, err)
	}
	return st
}

// run executes the workflow to its end and returns its result; it fails the test on a workflow
// error.
func (h *harness) run(in workflows.DeliveryInput) workflows.DeliveryState {
	h.t.Helper()
	h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		h.t.Fatalf("workflow failed: %v", err)
	}
	var st workflows.DeliveryState
	if err := h.env.GetWorkflowResult(&st); err != nil {
		h.t.Fatalf("workflow result: %v", err)
	}
	return st
}

func (h *harness) deliverOffsets() []time.Duration {
	var out []time.Duration
	for _, c := range h.delivers {
		out = append(out, c.at)
	}
	return out
}

func (h *harness) attemptNumbers() []int {
	var out []int
	for _, c := range h.delivers {
		out = append(out, c.in.Attempt)
	}
	return out
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func shift(offsets []time.Duration, by time.Duration) []time.Duration {
	out := make([]time.Duration, len(offsets))
	for i, o := range offsets {
		out[i] = o + by
	}
	return out
}

// TestDeliveryWorkflowSchedule: when every attempt fails, the default schedule makes exactly six
// attempts at 0, 1m, 6m, 21m, 1h21m and 7h21m, numbered 1..6, each telling the activity when the
// next one comes.
func TestDeliveryWorkflowSchedule(t *testing.T) {
	h := newHarness(t)
	st := h.run(input("website.published"))

	if got := h.deliverOffsets(); !slices.Equal(got, scheduleOffsets) {
		t.Errorf("attempt offsets = %v, want %v", got, scheduleOffsets)
	}
	if got, want := h.attemptNumbers(), seq(1, 6); !slices.Equal(got, want) {
		t.Errorf("attempt numbers = %v, want %v", got, want)
	}
	wantNext := append(slices.Clone(defaultSchedule), 0)
	for i, c := range h.delivers {
		if i < len(wantNext) && c.in.NextAttemptIn != wantNext[i] {
			t.Errorf("attempt %d: NextAttemptIn = %v, want %v", c.in.Attempt, c.in.NextAttemptIn, wantNext[i])
		}
		if c.in.DeliveryID != 11 || c.in.EventID != 22 || c.in.WebhookID != 33 {
			t.Errorf("attempt %d: ids = %d/%d/%d, want 11/22/33", c.in.Attempt, c.in.DeliveryID, c.in.EventID, c.in.WebhookID)
		}
	}
	if st.State != model.DeliveryExhausted || st.Attempts != 6 {
		t.Errorf("result = %+v, want state %s after 6 attempts", st, model.DeliveryExhausted)
	}
}

// TestDeliveryWorkflowDelayCountsFromAttemptEnd: each delay of the schedule starts when the previous
// attempt has ended ("delay after previous attempt", spec 6.4), so a slow receiver shifts the
// schedule by its answer times; the state query's NextAttemptAt follows the real timer.
func TestDeliveryWorkflowDelayCountsFromAttemptEnd(t *testing.T) {
	h := newHarness(t)
	took := 20 * time.Second
	h.deliverMock.After(took) // the mock records its call when the attempt ends
	var during workflows.DeliveryState
	h.at(2*time.Minute, func() { during = h.query() })
	h.run(input("website.published"))

	var want []time.Duration
	end := time.Duration(0)
	for i := range 6 {
		if i > 0 {
			end += defaultSchedule[i-1]
		}
		end += took
		want = append(want, end)
	}
	if got := h.deliverOffsets(); !slices.Equal(got, want) {
		t.Errorf("attempts ended at %v, want %v", got, want)
	}
	// Attempt 2 ran from 1m20s to 1m40s; attempt 3 is due 5m after it ended.
	if wantNext := start.Add(6*time.Minute + 40*time.Second); during.NextAttemptAt == nil || !during.NextAttemptAt.Equal(wantNext) {
		t.Errorf("state at 2m = %s, want next attempt at 6m40s", fmtState(during))
	}
}

// TestDeliveryWorkflowSuccessStopsSchedule: a success on attempt k ends the delivery there, without
// exhaustion or alert.
func TestDeliveryWorkflowSuccessStopsSchedule(t *testing.T) {
	for k := 1; k <= 6; k++ {
		t.Run(fmt.Sprintf("attempt %d", k), func(t *testing.T) {
			h := newHarness(t)
			h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
				if in.Attempt == k {
					return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
				}
				return failed(in.Attempt, h.env.Now()), nil
			}
			st := h.run(input("website.published"))

			if got, want := h.deliverOffsets(), scheduleOffsets[:k]; !slices.Equal(got, want) {
				t.Errorf("attempt offsets = %v, want %v", got, want)
			}
			if len(h.exhausted) != 0 || len(h.notices) != 0 {
				t.Errorf("MarkExhausted called %d times, notices started %d times; want neither", len(h.exhausted), len(h.notices))
			}
			want := workflows.DeliveryState{State: model.DeliveryDelivered, Attempts: k}
			if st.State != want.State || st.Attempts != want.Attempts || st.LastError != "" || st.NextAttemptAt != nil {
				t.Errorf("result = %+v, want %+v", st, want)
			}
			// Delivered at once, the delivery is never indexed; after a failure it is, to the end.
			if k == 1 && len(h.states) != 0 {
				t.Errorf("DeliveryState upserts = %v, want none for a delivery delivered at its first attempt", h.states)
			}
			if k > 1 && h.states[len(h.states)-1] != model.DeliveryDelivered {
				t.Errorf("DeliveryState upserts = %v, want the last to be %q", h.states, model.DeliveryDelivered)
			}
		})
	}
}

// TestDeliveryWorkflowFirstAttemptIsLocal: a delivery's first attempt runs as a local activity,
// inside the workflow task, and the later ones as regular activities on the retry queue; a manual
// retry's attempts are regular too.
func TestDeliveryWorkflowFirstAttemptIsLocal(t *testing.T) {
	h := newHarness(t)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		if in.Attempt == 3 || in.Attempt == 8 {
			return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	in := input("website.published")
	in.RetryTaskQueue = "webhookd-retry"
	h.run(in)
	var got []bool
	for _, c := range h.delivers {
		got = append(got, c.local)
	}
	if want := []bool{true, false, false}; !slices.Equal(got, want) {
		t.Errorf("attempts run as local activities: %v, want %v", got, want)
	}

	// A manual retry of an ended delivery: a new run whose first attempt is attempt 8.
	h = newHarness(t)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
	}
	in.PriorAttempts = 7
	h.run(in)
	if len(h.delivers) != 1 || h.delivers[0].in.Attempt != 8 || h.delivers[0].local {
		t.Errorf("manual retry's attempts: %+v, want attempt 8 as a regular activity", h.delivers)
	}
}

// TestDeliveryWorkflowHeldFirstAttemptSleepsToItsTurn: a first attempt held back with a turn further
// out than a regular attempt may wait for it in the worker (its attempt timeout and the record's
// margin) sleeps until that turn before it is made again as a regular activity: handed back at once,
// it would only be held again with the same turn (issue 40). One held with a turn within that wait
// is handed back at once, to wait for it in the worker.
func TestDeliveryWorkflowHeldFirstAttemptSleepsToItsTurn(t *testing.T) {
	for _, tc := range []struct {
		retryIn   time.Duration
		wantAfter time.Duration // the regular attempt is made no sooner than this after the first
		wantBy    time.Duration // and no later than this
	}{
		{retryIn: time.Hour, wantAfter: time.Hour, wantBy: time.Hour + time.Second},
		{retryIn: 2 * time.Second, wantAfter: 0, wantBy: time.Second},
	} {
		t.Run(tc.retryIn.String(), func(t *testing.T) {
			h := newHarness(t)
			h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
				if len(h.delivers) == 1 {
					return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "receiver host busy", RetryIn: tc.retryIn}, nil
				}
				return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
			}
			h.run(input("website.published"))
			if len(h.delivers) != 2 || !h.delivers[0].local || h.delivers[1].local {
				t.Fatalf("attempts %+v, want a local one held back, then a regular one", h.delivers)
			}
			if gap := h.delivers[1].at - h.delivers[0].at; gap < tc.wantAfter || gap > tc.wantBy {
				t.Errorf("held with its turn in %v: the regular attempt came %v after the local one, want %v to %v",
					tc.retryIn, gap, tc.wantAfter, tc.wantBy)
			}
		})
	}
}

// TestDeliveryWorkflowExhaustion: when the schedule runs out the webhook is marked exhausted once,
// with the last attempt's error, and the notices MarkExhausted recorded (when this exhaustion moved
// the webhook into failing) are started, and none else.
func TestDeliveryWorkflowExhaustion(t *testing.T) {
	for _, alert := range []bool{true, false} {
		t.Run(fmt.Sprintf("alert=%v", alert), func(t *testing.T) {
			h := newHarness(t)
			h.alert = alert
			st := h.run(input("website.published"))

			if len(h.delivers) != 6 {
				t.Fatalf("Deliver called %d times, want 6", len(h.delivers))
			}
			last := h.delivers[5]
			lastErr := failed(6, time.Time{}).Error
			wantEx := activities.ExhaustedInput{DeliveryID: 11, WebhookID: 33, EventID: 22,
				LastError: lastErr, LastAttemptAt: start.Add(last.at), LastErrorClass: activities.ClassHTTPStatus, LastStatusCode: 500,
				EventType: "website.published"}
			if len(h.exhausted) != 1 {
				t.Fatalf("MarkExhausted called %d times, want once", len(h.exhausted))
			}
			got := h.exhausted[0]
			gotIn := got.in
			gotIn.LastAttemptAt = time.Time{}
			wantIn := wantEx
			wantIn.LastAttemptAt = time.Time{}
			if gotIn != wantIn || !got.in.LastAttemptAt.Equal(wantEx.LastAttemptAt) || got.at != last.at {
				t.Errorf("MarkExhausted(%+v) at %v, want (%+v) at %v", got.in, got.at, wantEx, last.at)
			}
			if alert {
				if len(h.notices) != 1 || h.notices[0].in != 77 || h.notices[0].at != last.at {
					t.Errorf("notices started = %+v, want notice 77 at %v", h.notices, last.at)
				}
			} else if len(h.notices) != 0 {
				t.Errorf("notices started %d times after MarkExhausted recorded none", len(h.notices))
			}
			if st.State != model.DeliveryExhausted || st.LastError != lastErr {
				t.Errorf("result = %+v, want state %s, last error %q", st, model.DeliveryExhausted, lastErr)
			}
		})
	}
}

// TestDeliveryWorkflowNoticeStartFailureDoesNotEndDelivery: a notice whose deliveries did not start
// is logged and left to the sweeper; the workflow still waits for a retry signal.
func TestDeliveryWorkflowNoticeStartFailureDoesNotEndDelivery(t *testing.T) {
	h := newHarness(t)
	h.startErr = temporal.NewNonRetryableApplicationError("temporal away", "Unavailable", nil)
	h.signalRetryAt(8 * time.Hour)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		if in.Attempt == 7 {
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	st := h.run(input("website.published"))
	if len(h.notices) != 1 {
		t.Errorf("notice started %d times, want once (a non-retryable error is not retried)", len(h.notices))
	}
	if st.State != model.DeliveryDelivered || st.Attempts != 7 {
		t.Errorf("result = %+v, want delivered on attempt 7 after the retry signal", st)
	}
}

// TestDeliveryWorkflowRetrySignalAfterExhaustion: an operator's retry signal after exhaustion runs
// the schedule again from its first attempt; attempt numbers continue across the restart.
func TestDeliveryWorkflowRetrySignalAfterExhaustion(t *testing.T) {
	signalAt := 8*time.Hour + 30*time.Second
	for _, tc := range []struct {
		name        string
		succeedOn   int // attempt number that succeeds; 0: none
		wantOffsets []time.Duration
		wantState   string
		wantMarks   int
	}{
		{"success on first retried attempt", 7, append(slices.Clone(scheduleOffsets), signalAt), model.DeliveryDelivered, 1},
		{"success on third retried attempt", 9, append(slices.Clone(scheduleOffsets), shift(scheduleOffsets[:3], signalAt)...), model.DeliveryDelivered, 1},
		{"second exhaustion", 0, append(slices.Clone(scheduleOffsets), shift(scheduleOffsets, signalAt)...), model.DeliveryExhausted, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
				if in.Attempt == tc.succeedOn {
					return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
				}
				return failed(in.Attempt, h.env.Now()), nil
			}
			h.signalRetryAt(signalAt)
			var beforeSignal workflows.DeliveryState
			h.at(signalAt-time.Second, func() { beforeSignal = h.query() })
			st := h.run(input("website.published"))

			if got := h.deliverOffsets(); !slices.Equal(got, tc.wantOffsets) {
				t.Errorf("attempt offsets = %v, want %v", got, tc.wantOffsets)
			}
			if got, want := h.attemptNumbers(), seq(1, len(tc.wantOffsets)); !slices.Equal(got, want) {
				t.Errorf("attempt numbers = %v, want %v", got, want)
			}
			if len(h.exhausted) != tc.wantMarks {
				t.Errorf("MarkExhausted called %d times, want %d", len(h.exhausted), tc.wantMarks)
			}
			if beforeSignal.State != model.DeliveryExhausted || beforeSignal.Attempts != 6 || beforeSignal.NextAttemptAt != nil {
				t.Errorf("state just before the signal = %+v, want exhausted after 6 attempts, no next attempt", beforeSignal)
			}
			if st.State != tc.wantState || st.Attempts != len(tc.wantOffsets) {
				t.Errorf("result = %+v, want state %s after %d attempts", st, tc.wantState, len(tc.wantOffsets))
			}
			// The restart is visible to operators searching by DeliveryState.
			i := slices.Index(h.states, model.DeliveryExhausted)
			if i < 0 || i+1 >= len(h.states) || h.states[i+1] != model.DeliveryDelivering {
				t.Errorf("DeliveryState upserts = %v, want %s then %s on the retry", h.states, model.DeliveryExhausted, model.DeliveryDelivering)
			}
		})
	}
}

// TestDeliveryWorkflowRetryWindowEnds: without a retry signal an exhausted delivery ends when its
// retry window closes.
func TestDeliveryWorkflowRetryWindowEnds(t *testing.T) {
	h := newHarness(t)
	in := input("website.published")
	in.RetryWindow = 3 * 24 * time.Hour
	st := h.run(in)

	if got, want := h.since(), scheduleOffsets[5]+in.RetryWindow; got != want {
		t.Errorf("workflow ended at %v, want %v (last attempt + retry window)", got, want)
	}
	if st.State != model.DeliveryExhausted || st.Attempts != 6 {
		t.Errorf("result = %+v, want exhausted after 6 attempts", st)
	}
	if got, want := h.states[len(h.states)-1], model.DeliveryExhausted; got != want {
		t.Errorf("last DeliveryState upserted = %q, want %q", got, want)
	}
}

// TestDeliveryWorkflowRetrySignalDuringWait: a retry signal while waiting for the next scheduled
// attempt makes that attempt at once; the rest of the schedule follows from it.
func TestDeliveryWorkflowRetrySignalDuringWait(t *testing.T) {
	h := newHarness(t)
	signalAt := 3 * time.Minute // attempt 2 ran at 1m, attempt 3 is due at 6m
	h.signalRetryAt(signalAt)
	st := h.run(input("website.published"))

	want := []time.Duration{0, time.Minute, signalAt, signalAt + 15*time.Minute,
		signalAt + 75*time.Minute, signalAt + 435*time.Minute}
	if got := h.deliverOffsets(); !slices.Equal(got, want) {
		t.Errorf("attempt offsets = %v, want %v", got, want)
	}
	if got := h.attemptNumbers(); !slices.Equal(got, seq(1, 6)) {
		t.Errorf("attempt numbers = %v, want 1..6", got)
	}
	if st.Attempts != 6 || len(h.exhausted) != 1 {
		t.Errorf("result %+v, MarkExhausted calls %d; want 6 attempts and one exhaustion", st, len(h.exhausted))
	}
}

// TestDeliveryWorkflowWebhookGone: a deleted webhook cancels the delivery at once.
func TestDeliveryWorkflowWebhookGone(t *testing.T) {
	for _, goneOn := range []int{1, 3} {
		t.Run(fmt.Sprintf("attempt %d", goneOn), func(t *testing.T) {
			h := newHarness(t)
			h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
				if in.Attempt == goneOn {
					return activities.DeliverResult{WebhookGone: true}, nil
				}
				return failed(in.Attempt, h.env.Now()), nil
			}
			st := h.run(input("website.published"))

			if got, want := h.deliverOffsets(), scheduleOffsets[:goneOn]; !slices.Equal(got, want) {
				t.Errorf("attempt offsets = %v, want %v", got, want)
			}
			if len(h.exhausted) != 0 || len(h.notices) != 0 {
				t.Errorf("MarkExhausted called %d times, notices started %d times; want neither", len(h.exhausted), len(h.notices))
			}
			if st.State != model.DeliveryCanceled || st.Attempts != goneOn {
				t.Errorf("result = %+v, want %s after %d attempts", st, model.DeliveryCanceled, goneOn)
			}
			if got := h.since(); got != scheduleOffsets[goneOn-1] {
				t.Errorf("workflow ended at %v, want %v (right after the attempt)", got, scheduleOffsets[goneOn-1])
			}
			if got := h.states[len(h.states)-1]; got != model.DeliveryCanceled {
				t.Errorf("last DeliveryState upserted = %q, want %q", got, model.DeliveryCanceled)
			}
		})
	}
}

// TestDeliveryWorkflowTestEventNotRetried: a failed webhook.test marks the webhook failing and
// alerts the owner at once (spec 3.2), with no retry schedule.
func TestDeliveryWorkflowTestEventNotRetried(t *testing.T) {
	h := newHarness(t)
	st := h.run(input(model.EventTest))

	if len(h.delivers) != 1 {
		t.Fatalf("Deliver called %d times, want once", len(h.delivers))
	}
	if c := h.delivers[0]; c.at != 0 || c.in.Attempt != 1 || c.in.NextAttemptIn != 0 {
		t.Errorf("attempt = %+v at %v, want attempt 1 at 0 with no next attempt", c.in, c.at)
	}
	if len(h.exhausted) != 1 || h.exhausted[0].at != 0 || h.exhausted[0].in.LastError != failed(1, time.Time{}).Error {
		t.Errorf("MarkExhausted calls = %+v, want one at 0 with attempt 1's error", h.exhausted)
	}
	if len(h.notices) != 1 || h.notices[0].at != 0 {
		t.Errorf("notices started = %+v, want one at 0", h.notices)
	}
	if st.State != model.DeliveryExhausted || st.Attempts != 1 {
		t.Errorf("result = %+v, want exhausted after 1 attempt", st)
	}
}

// TestDeliveryWorkflowStartsAttemptNotices: a notice an attempt recorded (the webhook.recovered of
// a success that ended the webhook's failure) has its deliveries started right after the attempt.
func TestDeliveryWorkflowStartsAttemptNotices(t *testing.T) {
	h := newHarness(t)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		if in.Attempt == 2 {
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now(), Notices: []int64{91}}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	st := h.run(input("website.published"))
	if st.State != model.DeliveryDelivered || len(h.delivers) != 2 {
		t.Fatalf("result = %+v after %d attempts, want delivered at the second", st, len(h.delivers))
	}
	if len(h.notices) != 1 || h.notices[0].in != 91 || h.notices[0].at != h.delivers[1].at {
		t.Errorf("notices started = %+v, want notice 91 right after attempt 2 (at %v)", h.notices, h.delivers[1].at)
	}
}

// TestDeliveryWorkflowStateQuery: the state query shows where the delivery is in its schedule.
func TestDeliveryWorkflowStateQuery(t *testing.T) {
	h := newHarness(t)
	type probe struct {
		at   time.Duration
		want workflows.DeliveryState
	}
	ptr := func(d time.Duration) *time.Time { at := start.Add(d); return &at }
	probes := []probe{
		{30 * time.Second, workflows.DeliveryState{State: model.DeliveryRetrying, Attempts: 1, NextAttemptAt: ptr(time.Minute), LastError: failed(1, start).Error}},
		{3 * time.Minute, workflows.DeliveryState{State: model.DeliveryRetrying, Attempts: 2, NextAttemptAt: ptr(6 * time.Minute), LastError: failed(2, start).Error}},
		{time.Hour, workflows.DeliveryState{State: model.DeliveryRetrying, Attempts: 4, NextAttemptAt: ptr(81 * time.Minute), LastError: failed(4, start).Error}},
		{7 * time.Hour, workflows.DeliveryState{State: model.DeliveryRetrying, Attempts: 5, NextAttemptAt: ptr(441 * time.Minute), LastError: failed(5, start).Error}},
		{8 * time.Hour, workflows.DeliveryState{State: model.DeliveryExhausted, Attempts: 6, LastError: failed(6, start).Error}},
	}
	got := make([]workflows.DeliveryState, len(probes))
	for i, p := range probes {
		h.at(p.at, func() { got[i] = h.query() })
	}
	h.run(input("website.published"))

	for i, p := range probes {
		g := got[i]
		if g.State != p.want.State || g.Attempts != p.want.Attempts || g.LastError != p.want.LastError ||
			!equalTimePtr(g.NextAttemptAt, p.want.NextAttemptAt) {
			t.Errorf("state at %v = %s, want %s", p.at, fmtState(g), fmtState(p.want))
		}
	}
}

func equalTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func fmtState(s workflows.DeliveryState) string {
	next := "<nil>"
	if s.NextAttemptAt != nil {
		next = s.NextAttemptAt.Sub(start).String() + " after start"
	}
	return fmt.Sprintf("{%s attempts=%d next=%s lastError=%q}", s.State, s.Attempts, next, s.LastError)
}

// TestDeliveryWorkflowSearchAttribute: the DeliveryState search attribute follows the delivery,
// so operators can find retrying and exhausted deliveries in the Web UI.
func TestDeliveryWorkflowSearchAttribute(t *testing.T) {
	h := newHarness(t)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		if in.Attempt == 3 {
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		return failed(in.Attempt, h.env.Now()), nil
	}
	st := h.run(input("website.published"))

	want := []string{model.DeliveryRetrying, model.DeliveryRetrying, model.DeliveryDelivered}
	if !slices.Equal(h.states, want) {
		t.Errorf("DeliveryState upserts = %v, want %v", h.states, want)
	}
	if st.State != model.DeliveryDelivered {
		t.Errorf("result state = %s, want %s", st.State, model.DeliveryDelivered)
	}
}

// TestDeliveryWorkflowDeliverError documents what an infrastructure failure does: Deliver returns
// an error only when our own side (the database) failed. Temporal retries it (1s doubling to 1m,
// without limit) within the same delivery attempt, so an outage delays the delivery but never
// exhausts or loses it.
func TestDeliveryWorkflowDeliverError(t *testing.T) {
	dbDown := errors.New("load delivery 11: connection refused")

	t.Run("transient", func(t *testing.T) {
		h := newHarness(t)
		h.deliver = func(in activities.DeliverInput, activityAttempt int32) (activities.DeliverResult, error) {
			if activityAttempt < 3 {
				return activities.DeliverResult{}, dbDown
			}
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		st := h.run(input("website.published"))
		if got, want := h.deliverOffsets(), []time.Duration{0, time.Second, 3 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("activity attempts at %v, want %v", got, want)
		}
		if got := h.attemptNumbers(); !slices.Equal(got, []int{1, 1, 1}) {
			t.Errorf("delivery attempt numbers = %v, want 1 each time (activity retries are one delivery attempt)", got)
		}
		if st.State != model.DeliveryDelivered || st.Attempts != 1 {
			t.Errorf("result = %+v, want delivered on attempt 1", st)
		}
	})

	t.Run("long outage", func(t *testing.T) {
		// An outage must not lose the delivery: Deliver keeps being retried (1s doubling to 1m,
		// no attempt limit) until the database answers, and nothing is exhausted meanwhile. The
		// test environment caps "unlimited" at 10 activity attempts (the SDK's
		// defaultMaximumAttemptsForUnitTest), so the outage here ends before the tenth.
		h := newHarness(t)
		h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
			if h.since() < 200*time.Second {
				return activities.DeliverResult{}, dbDown
			}
			return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
		}
		st := h.run(input("website.published"))
		if st.State != model.DeliveryDelivered || st.Attempts != 1 {
			t.Fatalf("result = %+v, want delivered on delivery attempt 1 once the database is back", st)
		}
		if n := len(h.deliverOffsets()); n != 10 {
			t.Errorf("Deliver ran %d times through the outage, want 10 (0s, 1s, 3s, ... 243s)", n)
		}
		if len(h.exhausted) != 0 || len(h.notices) != 0 {
			t.Errorf("MarkExhausted called %d times, notices started %d times; want neither", len(h.exhausted), len(h.notices))
		}
	})
}

// testLogger sends the SDK's log lines to the test's log, shown when it fails or with -v.
func testLogger(t *testing.T) log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestDeliveryWorkflowResendDuringDeliveredAttempt: a retry signal that comes in while the attempt
// that delivers is still running (a resend of a delivery that is about to be delivered) is not
// dropped: the delivery is sent once more, as the next attempt, before the workflow ends delivered.
func TestDeliveryWorkflowResendDuringDeliveredAttempt(t *testing.T) {
	h := newHarness(t)
	took := 20 * time.Second
	h.deliverMock.After(took)
	h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
		return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
	}
	h.signalRetryAt(took / 2)
	st := h.run(input("website.published"))

	if got, want := h.deliverOffsets(), []time.Duration{took, 2 * took}; !slices.Equal(got, want) {
		t.Errorf("attempts ended at %v, want %v (the resend right after the first)", got, want)
	}
	if got := h.attemptNumbers(); !slices.Equal(got, seq(1, 2)) {
		t.Errorf("attempt numbers = %v, want 1, 2", got)
	}
	if st.State != model.DeliveryDelivered || st.Attempts != 2 {
		t.Errorf("result = %s, want delivered after 2 attempts", fmtState(st))
	}
	if len(h.states) != 0 {
		t.Errorf("DeliveryState upserts = %v, want none: no attempt failed", h.states)
	}
}

// TestDeliveryWorkflowConcurrentResends: ten retry signals that come in together (ten concurrent
// resends of one delivery) make at most two attempts, not ten: those waiting when one is taken are
// consumed with it, and those that come in while an attempt runs count as one resend after it
// (issue 18). The test environment runs the workflow after each signal, so of ten signals sent at
// one instant into a wait, the first ends the wait alone and the other nine come in during the
// attempt it starts.
func TestDeliveryWorkflowConcurrentResends(t *testing.T) {
	const took = 20 * time.Second // each attempt's duration
	type resendCase struct {
		name     string
		schedule []time.Duration
		signalAt time.Duration
		succeed  bool
		// want: when each attempt ended, the ones before the signals and after included.
		want      []time.Duration
		wantState string
		// payload is each signal's: nil, as an operator's, or a resend's RetryRequest.
		payload any
		// settled: the states SettleClaim gave back, for signals that asked for nothing.
		settled []string
	}
	cases := []resendCase{
		// Attempt 1 ends at 20s. The first signal ends the hour's wait at 10m: attempt 2, the last
		// of the schedule, fails; the nine others end the exhausted wait: attempt 3, which runs the
		// schedule again (attempt 4 an hour later).
		{"during a scheduled wait", []time.Duration{time.Hour}, 10 * time.Minute, false,
			[]time.Duration{took, 10*time.Minute + took, 10*time.Minute + 2*took, time.Hour + 10*time.Minute + 3*took}, model.DeliveryExhausted, nil, nil},
		// Attempt 1 fails and exhausts the delivery; the signals end its retry window's wait.
		{"during the exhausted wait", []time.Duration{}, time.Hour, false,
			[]time.Duration{took, time.Hour + took, time.Hour + 2*took}, model.DeliveryExhausted, nil, nil},
		// They come in while attempt 1 runs: one attempt right after it.
		{"during a failing attempt", []time.Duration{time.Hour}, took / 2, false,
			[]time.Duration{took, 2 * took}, model.DeliveryExhausted, nil, nil},
		{"during the attempt that delivers", []time.Duration{time.Hour}, took / 2, true,
			[]time.Duration{took, 2 * took}, model.DeliveryDelivered, nil, nil},
	}
	// Resends say when they were asked for (workflows.RetryRequest). Those asked before the last
	// attempt started, which came in late, ask for nothing more; those asked after it, for one.
	asked := func(at time.Duration) workflows.RetryRequest { return workflows.RetryRequest{AskedAt: start.Add(at)} }
	cases = append(cases,
		// Attempt 1 started at 0: the wait goes on to the scheduled attempt 2.
		resendCase{"asked before the attempt they came in during", []time.Duration{time.Hour}, took / 2, false,
			[]time.Duration{took, time.Hour + 2*took}, model.DeliveryExhausted, asked(-time.Second), nil},
		resendCase{"asked during the attempt they came in during", []time.Duration{time.Hour}, took / 2, false,
			[]time.Duration{took, 2 * took}, model.DeliveryExhausted, asked(took / 4), nil},
		resendCase{"asked before the attempt that delivers", []time.Duration{time.Hour}, took / 2, true,
			[]time.Duration{took}, model.DeliveryDelivered, asked(-time.Second), []string{model.DeliveryDelivered}},
		// In the exhausted wait: no attempt, and the retry window ends 24 h after attempt 1. The
		// first signal is settled alone, the nine that come in meanwhile together.
		resendCase{"asked before the exhausted attempt", []time.Duration{}, time.Hour, false,
			[]time.Duration{took}, model.DeliveryExhausted, asked(-time.Second), []string{model.DeliveryExhausted, model.DeliveryExhausted}},
		resendCase{"asked after the exhausted attempt", []time.Duration{}, time.Hour, false,
			[]time.Duration{took, time.Hour + took, time.Hour + 2*took}, model.DeliveryExhausted, asked(time.Hour), nil},
	)
	// A recovery's signals ask for an attempt only if the delivery has not been delivered (issue
	// 41): one that comes in during the last attempt runs the schedule again once that attempt
	// fails, and asks for nothing after one that delivers.
	recovery := workflows.RetryRequest{UnlessDelivered: true}
	cases = append(cases,
		resendCase{"a recovery during the last attempt, which fails", []time.Duration{}, took / 2, false,
			[]time.Duration{took, 2 * took}, model.DeliveryExhausted, recovery, nil},
		resendCase{"a recovery during the attempt that delivers", []time.Duration{time.Hour}, took / 2, true,
			[]time.Duration{took}, model.DeliveryDelivered, recovery, []string{model.DeliveryDelivered}},
		resendCase{"a recovery during a scheduled wait", []time.Duration{time.Hour}, 10 * time.Minute, false,
			[]time.Duration{took, 10*time.Minute + took, 10*time.Minute + 2*took, time.Hour + 10*time.Minute + 3*took}, model.DeliveryExhausted, recovery, nil},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.deliverMock.After(took)
			if tc.succeed {
				h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
					return activities.DeliverResult{Delivered: true, StatusCode: 200, AttemptedAt: h.env.Now()}, nil
				}
			}
			h.at(tc.signalAt, func() {
				for range 10 {
					h.env.SignalWorkflow(workflows.SignalRetry, tc.payload)
				}
			})
			in := input("website.published")
			in.Schedule, in.RetryWindow = tc.schedule, 24*time.Hour
			st := h.run(in)

			got := h.deliverOffsets()
			resent := 0
			for _, at := range got {
				if at > tc.signalAt && at <= tc.signalAt+30*time.Minute {
					resent++
				}
			}
			if resent > 2 {
				t.Errorf("ten signals at %v made %d attempts, want at most 2", tc.signalAt, resent)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("attempts ended at %v, want %v", got, tc.want)
			}
			if st.State != tc.wantState || st.Attempts != len(tc.want) {
				t.Errorf("result = %s, want %s after %d attempts", fmtState(st), tc.wantState, len(tc.want))
			}
			if !slices.Equal(h.settled, tc.settled) {
				t.Errorf("SettleClaim gave back %v, want %v", h.settled, tc.settled)
			}
		})
	}
}

// TestOrderedDeliveryPassesItsLaneOnWhenDone (issue 43): an ordered webhook's delivery starts its
// lane's next (AdvanceLane, with its lane and number) once it is delivered, or canceled (its owner
// skipped it), and not before; one that is exhausted waits for its owner with its lane behind it,
// one that fails holds its lane, and an unordered delivery has no lane to pass on.
func TestOrderedDeliveryPassesItsLaneOnWhenDone(t *testing.T) {
	ordered := func() workflows.DeliveryInput {
		in := input("campaign.updated")
		in.Lane, in.LaneSeq, in.RetryWindow = 3, 4, workflows.LaneRetryWindow
		return in
	}
	t.Run("delivered", func(t *testing.T) {
		h := newHarness(t)
		h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
			if in.Attempt < 2 {
				return failed(in.Attempt, h.env.Now()), nil
			}
			return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
		}
		if st := h.run(ordered()); st.State != model.DeliveryDelivered {
			t.Fatalf("state %s, want delivered", st.State)
		}
		if fmt.Sprint(h.advanced) != "[{3 4}]" {
			t.Fatalf("lane advanced %v, want once past number 4 of lane 3", h.advanced)
		}
	})
	t.Run("skipped while exhausted", func(t *testing.T) {
		h := newHarness(t)
		var a *activities.Activities
		h.env.OnActivity(a.CancelDelivery, mock.Anything, mock.Anything).Return(nil)
		var atCancel int
		h.at(30*24*time.Hour, func() { // a month later, still waiting: the owner skips it
			h.mu.Lock()
			atCancel = len(h.advanced)
			h.mu.Unlock()
			h.env.CancelWorkflow()
		})
		h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, ordered())
		if err := h.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
			t.Fatalf("workflow error %v, want canceled", err)
		}
		if atCancel != 0 || fmt.Sprint(h.advanced) != "[{3 4}]" {
			t.Fatalf("lane advanced %d times before the skip, then %v; want none, then once", atCancel, h.advanced)
		}
	})
	t.Run("failed", func(t *testing.T) {
		h := newHarness(t)
		h.deliver = func(activities.DeliverInput, int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{}, temporal.NewNonRetryableApplicationError("unreadable", activities.ErrTypeSecretUnreadable, nil)
		}
		h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, ordered())
		if h.env.GetWorkflowError() == nil || len(h.advanced) != 0 {
			t.Fatalf("error %v, lane advanced %v; want a failure that holds the lane", h.env.GetWorkflowError(), h.advanced)
		}
	})
	t.Run("unordered", func(t *testing.T) {
		h := newHarness(t)
		h.deliver = func(activities.DeliverInput, int32) (activities.DeliverResult, error) {
			return activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: h.env.Now()}, nil
		}
		h.run(input("campaign.updated"))
		if len(h.advanced) != 0 {
			t.Fatalf("an unordered delivery advanced %v", h.advanced)
		}
	})
}
