package workflows_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestDeliveryWorkflowPermanentError: an internal error no retry can fix (a missing delivery row,
// a secret the current key cannot open) is not retried. The workflow sets DeliveryState to
// exhausted and fails with the error, so the delivery is visible instead of retrying forever.
func TestDeliveryWorkflowPermanentError(t *testing.T) {
	for _, errType := range []string{activities.ErrTypeDeliveryMissing, activities.ErrTypeSecretUnreadable} {
		t.Run(errType, func(t *testing.T) {
			h := newHarness(t)
			h.deliver = func(activities.DeliverInput, int32) (activities.DeliverResult, error) {
				return activities.DeliverResult{}, temporal.NewNonRetryableApplicationError("cannot be fixed by a retry", errType, nil)
			}
			h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, input("website.published"))
			if !h.env.IsWorkflowCompleted() {
				t.Fatal("workflow did not end")
			}
			var appErr *temporal.ApplicationError
			if err := h.env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Type() != errType {
				t.Fatalf("workflow error = %v, want an application error of type %s", err, errType)
			}
			if n := len(h.delivers); n != 1 {
				t.Errorf("Deliver ran %d times, want once (not retried)", n)
			}
			if want := []string{model.DeliveryExhausted}; !slices.Equal(h.states, want) {
				t.Errorf("DeliveryState upserts = %v, want %v", h.states, want)
			}
			if len(h.exhausted) != 0 || len(h.notices) != 0 {
				t.Errorf("MarkExhausted %d, notices started %d: an internal error is the operator's, not the owner's", len(h.exhausted), len(h.notices))
			}
		})
	}
}

// TestDeliverInputCarriesAttemptTimeout: every attempt is bounded by the workflow input's attempt
// timeout, the value the activity's StartToClose comes from, and not by the worker's own config.
func TestDeliverInputCarriesAttemptTimeout(t *testing.T) {
	h := newHarness(t)
	in := input("website.published")
	h.run(in)
	if len(h.delivers) == 0 {
		t.Fatal("no attempt")
	}
	for _, c := range h.delivers {
		if c.in.AttemptTimeout != in.AttemptTimeout {
			t.Errorf("attempt %d: AttemptTimeout = %v, want the input's %v", c.in.Attempt, c.in.AttemptTimeout, in.AttemptTimeout)
		}
	}
}

// TestDeliverStartToCloseFromBudget: each way an attempt runs (the local first attempt, the
// attempt it hands back, a later one on the retry queue) is scheduled with the StartToClose of
// activities.AttemptBudget for the input's attempt timeout, the one the activity's wait for its
// turn is taken from.
func TestDeliverStartToCloseFromBudget(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 10 * time.Second, time.Minute} {
		h := newHarness(t)
		calls := 0
		h.deliver = func(in activities.DeliverInput, _ int32) (activities.DeliverResult, error) {
			calls++
			if calls == 1 { // the local attempt finds its host busy and hands it back
				return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "held back"}, nil
			}
			return failed(in.Attempt, h.env.Now()), nil
		}
		in := input("website.published")
		in.AttemptTimeout = timeout
		h.run(in)
		want := activities.AttemptBudget{Timeout: timeout}.StartToClose()
		ways := map[string]bool{}
		for _, c := range h.delivers {
			way := "local"
			switch {
			case c.local:
			case c.queue == in.RetryTaskQueue:
				way = "retried"
			default:
				way = "handed back"
			}
			ways[way] = true
			// The test environment takes the deadline from its wall clock a few microseconds after
			// the start time: a budget's parts are seconds.
			if d := c.startToClose - want; d < -100*time.Millisecond || d > 100*time.Millisecond {
				t.Errorf("timeout %v: attempt %d (%s) has StartToClose %v, want the budget's %v", timeout, c.in.Attempt, way, c.startToClose, want)
			}
		}
		if len(ways) != 3 {
			t.Errorf("timeout %v: attempts ran %v, want local, handed back and retried", timeout, ways)
		}
	}
}

// TestDeliveryWorkflowCanceled: a delivery waiting in its retry window whose workflow is canceled
// (its webhook was deleted) marks its delivery canceled, sets DeliveryState canceled and ends as
// canceled at once instead of waiting out the window.
func TestDeliveryWorkflowCanceled(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Duration // when the cancel comes
	}{
		{"in the retry window", 8 * time.Hour},
		{"between scheduled attempts", 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var a *activities.Activities
			var canceledIDs []int64
			h.env.OnActivity(a.CancelDelivery, mock.Anything, mock.Anything).Return(func(_ context.Context, id int64) error {
				h.mu.Lock()
				defer h.mu.Unlock()
				canceledIDs = append(canceledIDs, id)
				return nil
			})
			var endedAt time.Duration
			h.at(tc.at, func() { h.env.CancelWorkflow() })
			in := input("website.published")
			h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			endedAt = h.since()
			if !h.env.IsWorkflowCompleted() {
				t.Fatal("workflow did not end")
			}
			if err := h.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
				t.Fatalf("workflow error = %v, want canceled", err)
			}
			if endedAt != tc.at {
				t.Errorf("workflow ended at %v, want at the cancel (%v)", endedAt, tc.at)
			}
			if !slices.Equal(canceledIDs, []int64{in.DeliveryID}) {
				t.Errorf("CancelDelivery calls = %v, want [%d]", canceledIDs, in.DeliveryID)
			}
			if len(h.states) == 0 || h.states[len(h.states)-1] != model.DeliveryCanceled {
				t.Errorf("DeliveryState upserts = %v, want the last to be %s", h.states, model.DeliveryCanceled)
			}
		})
	}
}

// TestDeliveryWorkflowWindowEnd: when the retry window closes, a delivery whose webhook was
// deleted meanwhile (the delete could not reach the workflow) ends canceled; otherwise exhausted.
func TestDeliveryWorkflowWindowEnd(t *testing.T) {
	for _, gone := range []bool{false, true} {
		want := model.DeliveryExhausted
		if gone {
			want = model.DeliveryCanceled
		}
		t.Run(want, func(t *testing.T) {
			h := newHarness(t)
			h.webhookGone = gone
			st := h.run(input("website.published"))
			if st.State != want {
				t.Errorf("result state %s, want %s", st.State, want)
			}
			if last := h.states[len(h.states)-1]; last != want {
				t.Errorf("last DeliveryState %s, want %s", last, want)
			}
		})
	}
}

// TestDeliveryWorkflowRejectsIncompleteInput: an input without a retry task queue or an attempt
// timeout fails the workflow at once, naming the field, before any attempt: the first would leave
// retries on the first attempts' queue, the second would give the activity a StartToClose the
// exchange can outlast.
func TestDeliveryWorkflowRejectsIncompleteInput(t *testing.T) {
	for _, tc := range []struct {
		field string
		clear func(*workflows.DeliveryInput)
	}{
		{"RetryTaskQueue", func(in *workflows.DeliveryInput) { in.RetryTaskQueue = "" }},
		{"AttemptTimeout", func(in *workflows.DeliveryInput) { in.AttemptTimeout = 0 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			h := newHarness(t)
			in := input("website.published")
			tc.clear(&in)
			h.env.ExecuteWorkflow(workflows.DeliveryWorkflow, in)
			if !h.env.IsWorkflowCompleted() {
				t.Fatal("workflow did not end")
			}
			var appErr *temporal.ApplicationError
			err := h.env.GetWorkflowError()
			if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeInvalidInput || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("workflow error = %v, want a %s failure naming %s", err, workflows.ErrTypeInvalidInput, tc.field)
			}
			if len(h.delivers) != 0 || len(h.states) != 0 {
				t.Errorf("Deliver ran %d times, DeliveryState upserts %v; want neither", len(h.delivers), h.states)
			}
		})
	}
}
