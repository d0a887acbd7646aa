package dispatch_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// runBatch runs one of the batch retry activities in the SDK's activity test environment.
func runBatch(t *testing.T, f *fixture, activity any, in any) (int, error) {
	t.Helper()
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&dispatch.Activities{DB: f.db.DB, Dispatcher: f.d})
	v, err := env.ExecuteActivity(activity, in)
	if err != nil {
		return 0, err
	}
	var n int
	if err := v.Get(&n); err != nil {
		t.Fatal(err)
	}
	return n, nil
}

// TestRetryExhaustedActivity: a webhook-wide retry's activity hands over each exhausted delivery up
// to its bound, one at a time, skips one another retry has claimed and one no longer exhausted,
// and leaves no claim of its own.
func TestRetryExhaustedActivity(t *testing.T) {
	f := newFixture(t)
	a := &dispatch.Activities{DB: f.db.DB, Dispatcher: f.d}
	first := f.delivery(t, model.DeliveryExhausted, 5)
	f.tc.run(workflows.DeliveryWorkflowID(first.EventID, first.WebhookID), nil) // still running: signaled
	claimed := f.delivery(t, model.DeliveryExhausted, 5)
	claimedAt := model.Now()
	f.claim(t, claimed.DeliveryID, model.DeliveryExhausted, claimedAt)
	f.delivery(t, model.DeliveryDelivered, 1)
	last := f.delivery(t, model.DeliveryExhausted, 2)  // ended: run again
	after := f.delivery(t, model.DeliveryExhausted, 5) // exhausted after the retry was asked for

	n, err := runBatch(t, f, a.RetryExhausted, workflows.RetryWebhookInput{WebhookID: f.hook.ID, UpTo: last.DeliveryID})
	if err != nil || n != 2 {
		t.Fatalf("RetryExhausted = %d, %v; want 2", n, err)
	}
	if s := f.tc.signalsTo(workflows.DeliveryWorkflowID(first.EventID, first.WebhookID)); len(s) != 1 {
		t.Errorf("running delivery got %d signals, want 1", len(s))
	}
	if s := f.tc.startsOf(workflows.DeliveryWorkflowID(last.EventID, last.WebhookID)); len(s) != 1 {
		t.Errorf("ended delivery got %d new runs, want 1", len(s))
	}
	for _, r := range []model.DeliveryRef{claimed, after} {
		id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
		if len(f.tc.signalsTo(id))+len(f.tc.startsOf(id)) != 0 {
			t.Errorf("delivery %d was handed over", r.DeliveryID)
		}
	}
	for _, r := range []model.DeliveryRef{first, last} {
		if d := f.load(t, r.DeliveryID); d.State != model.DeliveryDelivering || d.ClaimedAt != nil {
			t.Errorf("retried delivery %d: state %s, claimed %v; want delivering, no claim", r.DeliveryID, d.State, d.ClaimedAt)
		}
	}
	if d := f.load(t, claimed.DeliveryID); d.ClaimedAt == nil || !d.ClaimedAt.Equal(claimedAt) {
		t.Errorf("another retry's claim = %v, want %v kept", d.ClaimedAt, claimedAt)
	}
}

// TestRecoverDeliveriesActivityStopsAtTemporalError: a recovery's activity stops at the first
// delivery Temporal refuses, with ErrTemporal and the count of those before it; the refused one
// gets its state back, unclaimed, and the ones after it are untouched, for the activity's retry.
func TestRecoverDeliveriesActivityStopsAtTemporalError(t *testing.T) {
	f := newFixture(t)
	a := &dispatch.Activities{DB: f.db.DB, Dispatcher: f.d}
	ok := f.delivery(t, model.DeliveryRetrying, 1)
	f.tc.run(workflows.DeliveryWorkflowID(ok.EventID, ok.WebhookID), nil)
	refused := f.delivery(t, model.DeliveryExhausted, 5)
	later := f.delivery(t, model.DeliveryExhausted, 5)
	refusedID := workflows.DeliveryWorkflowID(refused.EventID, refused.WebhookID)
	f.tc.signalErr = func(id string) error {
		if id == refusedID {
			return unavailable
		}
		return nil
	}

	in := workflows.RecoverInput{WebhookID: f.hook.ID, Since: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Until: model.Now().Add(time.Hour), UpTo: later.DeliveryID}
	_, err := runBatch(t, f, a.RecoverDeliveries, in)
	// The activity's error reaches the workflow as an application error carrying the message.
	if err == nil || !strings.Contains(err.Error(), unavailable.Error()) {
		t.Fatalf("RecoverDeliveries error = %v, want Temporal's %q", err, unavailable.Error())
	}
	if s := f.tc.signalsTo(workflows.DeliveryWorkflowID(ok.EventID, ok.WebhookID)); len(s) != 1 {
		t.Errorf("the delivery before the error got %d signals, want 1", len(s))
	}
	if d := f.load(t, refused.DeliveryID); d.State != model.DeliveryExhausted || d.ClaimedAt != nil {
		t.Errorf("refused delivery: state %s, claimed %v; want exhausted again, no claim", d.State, d.ClaimedAt)
	}
	if d := f.load(t, later.DeliveryID); d.State != model.DeliveryExhausted || d.ClaimedAt != nil {
		t.Errorf("delivery after the error: state %s, claimed %v; want untouched", d.State, d.ClaimedAt)
	}
	id := workflows.DeliveryWorkflowID(later.EventID, later.WebhookID)
	if len(f.tc.signalsTo(id))+len(f.tc.startsOf(id)) != 0 {
		t.Error("the delivery after the error was handed over")
	}
}

// TestRecoverDeliveriesActivityCoversAttemptsInFlight: a recovery signals the running workflow of
// a delivery with an attempt in flight (its first, pending; a later one, delivering) with a retry
// that asks for an attempt only if the delivery is not delivered, without claiming it; its other
// signals ask the same; a pending delivery whose workflow has not started is left to its start.
func TestRecoverDeliveriesActivityCoversAttemptsInFlight(t *testing.T) {
	f := newFixture(t)
	a := &dispatch.Activities{DB: f.db.DB, Dispatcher: f.d}
	first := f.delivery(t, model.DeliveryPending, 0)
	last := f.delivery(t, model.DeliveryDelivering, 3)
	exhausted := f.delivery(t, model.DeliveryExhausted, 3)
	unstarted := f.delivery(t, model.DeliveryPending, 0)
	for _, r := range []model.DeliveryRef{first, last, exhausted} {
		f.tc.run(workflows.DeliveryWorkflowID(r.EventID, r.WebhookID), nil)
	}

	in := workflows.RecoverInput{WebhookID: f.hook.ID, Since: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Until: model.Now().Add(time.Hour), UpTo: unstarted.DeliveryID}
	n, err := runBatch(t, f, a.RecoverDeliveries, in)
	if err != nil || n != 3 {
		t.Fatalf("RecoverDeliveries = %d, %v; want 3", n, err)
	}
	for _, r := range []model.DeliveryRef{first, last, exhausted} {
		s := f.tc.signalsTo(workflows.DeliveryWorkflowID(r.EventID, r.WebhookID))
		if len(s) != 1 || s[0].arg != (workflows.RetryRequest{UnlessDelivered: true}) {
			t.Errorf("delivery %d (%s) got signals %+v, want one retry unless delivered", r.DeliveryID, r.State, s)
		}
	}
	for _, r := range []model.DeliveryRef{first, last} {
		if d := f.load(t, r.DeliveryID); d.State != r.State || d.ClaimedAt != nil {
			t.Errorf("delivery in flight %d: state %s, claimed %v; want %s, no claim", r.DeliveryID, d.State, d.ClaimedAt, r.State)
		}
	}
	id := workflows.DeliveryWorkflowID(unstarted.EventID, unstarted.WebhookID)
	if len(f.tc.signalsTo(id))+len(f.tc.startsOf(id)) != 0 {
		t.Error("a pending delivery whose workflow has not started was handed over")
	}
	if d := f.load(t, unstarted.DeliveryID); d.State != model.DeliveryPending || d.ClaimedAt != nil {
		t.Errorf("unstarted delivery: state %s, claimed %v; want pending, no claim", d.State, d.ClaimedAt)
	}
}
