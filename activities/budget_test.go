package activities

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/activities/egress"
)

// TestAttemptBudgetFits holds the parts of an attempt's time to each other: the wait for a turn,
// the exchange and the record fit in the activity's StartToClose, the wait covers one attempt
// ahead at a busy receiver, and the worker's stop timeout covers an attempt in flight. The
// StartToClose stays the value running workflows were scheduled with (2 × timeout + 10 s).
func TestAttemptBudgetFits(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		b := AttemptBudget{Timeout: timeout}
		stc := b.StartToClose()
		if want := 2*timeout + 10*time.Second; stc != want {
			t.Errorf("timeout %v: StartToClose %v, want %v as recorded histories have it", timeout, stc, want)
		}
		wait := b.TurnWait(stc) // at the activity's start
		if used := wait + timeout + RecordMargin; used > stc {
			t.Errorf("timeout %v: wait %v + exchange %v + record %v = %v, beyond StartToClose %v", timeout, wait, timeout, RecordMargin, used, stc)
		}
		if ahead := timeout + RecordMargin; wait < ahead {
			t.Errorf("timeout %v: an attempt may wait %v for its turn, less than the attempt ahead of it takes (%v)", timeout, wait, ahead)
		}
		if inFlight := timeout + RecordMargin; b.StopTimeout() < inFlight {
			t.Errorf("timeout %v: stop timeout %v, less than an attempt's exchange and record (%v)", timeout, b.StopTimeout(), inFlight)
		}
		if got := b.TurnWait(timeout); got != 0 {
			t.Errorf("timeout %v: with only the exchange's time left, TurnWait = %v, want 0", timeout, got)
		}
	}
}

// TestTurnWaitFromBudget: Deliver's wait for its turn is the budget's, given its activity's
// deadline, for the exchange it makes (the input's timeout, under the egress client's ceiling).
func TestTurnWaitFromBudget(t *testing.T) {
	out, err := egress.New(egress.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Egress: out}
	for _, tc := range []struct {
		attemptTimeout, exchange time.Duration
	}{
		{3 * time.Second, 3 * time.Second},
		{10 * time.Second, 10 * time.Second},
		{30 * time.Second, 10 * time.Second}, // the worker's timeout is a ceiling
		{0, 10 * time.Second},                // a direct call without one
	} {
		b := AttemptBudget{Timeout: tc.exchange}
		// The deadline the workflow's StartToClose gives the activity.
		ctx, cancel := context.WithTimeout(context.Background(), AttemptBudget{Timeout: tc.attemptTimeout}.StartToClose())
		want := b.TurnWait(AttemptBudget{Timeout: tc.attemptTimeout}.StartToClose())
		got := a.turnWait(ctx, activity.Info{}, tc.attemptTimeout)
		if got > want || got < want-time.Second {
			t.Errorf("attempt timeout %v: turnWait = %v, want %v (the budget's for a %v exchange)", tc.attemptTimeout, got, want, tc.exchange)
		}
		if got := a.turnWait(ctx, activity.Info{IsLocalActivity: true}, tc.attemptTimeout); got != 0 {
			t.Errorf("attempt timeout %v: a local attempt may wait %v, want 0", tc.attemptTimeout, got)
		}
		cancel()
		if got := a.turnWait(context.Background(), activity.Info{}, tc.attemptTimeout); got != 0 {
			t.Errorf("attempt timeout %v: without a deadline turnWait = %v, want 0", tc.attemptTimeout, got)
		}
	}
}
