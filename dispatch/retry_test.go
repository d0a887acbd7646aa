package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// unavailable is Temporal's answer while its frontend is away.
var unavailable = serviceerror.NewUnavailable("frontend away")

// TestRetryWebhook: a webhook-wide retry enables the webhook, and starts one RetryWebhookWorkflow
// named by the webhook and its largest exhausted delivery, for the exhausted ones only; with none
// exhausted it starts nothing; a start Temporal refuses is ErrTemporal.
func TestRetryWebhook(t *testing.T) {
	t.Run("none exhausted", func(t *testing.T) {
		f := newFixture(t)
		f.delivery(t, model.DeliveryDelivered, 1)
		f.disable(t)
		n, id, err := f.d.RetryWebhook(t.Context(), f.db, f.hook.ID)
		if err != nil || n != 0 || id != "" {
			t.Fatalf("RetryWebhook = %d, %q, %v; want 0, no workflow", n, id, err)
		}
		if len(f.tc.starts) != 0 {
			t.Fatalf("started %d workflows with nothing exhausted", len(f.tc.starts))
		}
		if f.disabled(t) {
			t.Fatal("the webhook is still disabled after a retry")
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		f := newFixture(t)
		f.delivery(t, model.DeliveryExhausted, 5)
		f.delivery(t, model.DeliveryDelivered, 1)
		last := f.delivery(t, model.DeliveryExhausted, 5)
		f.disable(t)
		n, id, err := f.d.RetryWebhook(t.Context(), f.db, f.hook.ID)
		in := workflows.RetryWebhookInput{WebhookID: f.hook.ID, UpTo: last.DeliveryID}
		if err != nil || n != 2 || id != workflows.RetryWebhookWorkflowID(in) {
			t.Fatalf("RetryWebhook = %d, %q, %v; want 2, %q", n, id, err, workflows.RetryWebhookWorkflowID(in))
		}
		starts := f.tc.startsOf(id)
		if len(starts) != 1 {
			t.Fatalf("%d starts of %s, want 1", len(starts), id)
		}
		s := starts[0]
		if s.opts.TaskQueue != "q" || s.opts.WorkflowIDConflictPolicy != enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
			s.opts.WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
			t.Errorf("start options %+v", s.opts)
		}
		if len(s.args) != 1 || s.args[0] != in {
			t.Errorf("workflow input %v, want %v", s.args, in)
		}
		if f.disabled(t) {
			t.Fatal("the webhook is still disabled after a retry")
		}
		// Asked again while the first runs: the same workflow, not a second.
		if _, again, err := f.d.RetryWebhook(t.Context(), f.db, f.hook.ID); err != nil || again != id || len(f.tc.runs) != 1 {
			t.Fatalf("second retry = %q, %v with %d workflows; want %q and one workflow", again, err, len(f.tc.runs), id)
		}
	})
	t.Run("temporal down", func(t *testing.T) {
		f := newFixture(t)
		f.delivery(t, model.DeliveryExhausted, 5)
		f.tc.startErr = func(string) error { return unavailable }
		n, id, err := f.d.RetryWebhook(t.Context(), f.db, f.hook.ID)
		if !errors.Is(err, dispatch.ErrTemporal) || n != 0 || id != "" {
			t.Fatalf("RetryWebhook = %d, %q, %v; want ErrTemporal", n, id, err)
		}
	})
}

// TestResend covers each way a resend goes: by the delivery's state (a running workflow signaled,
// an ended one run again with its attempts numbered on, a delivering one joined without a claim,
// a canceled one refused), and by what Temporal answers (a concurrent start, an outage that gives
// the delivery its state back). Every resend that reaches the workflow enables the webhook and
// leaves no claim behind.
func TestResend(t *testing.T) {
	askedAt := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		state    string
		running  bool // the delivery's workflow runs
		startErr error
		sigErr   error
		wantErr  error
		// wantState is the delivery's state afterwards; signal and start what reached Temporal.
		wantState     string
		signal, start bool
		enabled       bool
	}{
		{name: "retrying, signaled", state: model.DeliveryRetrying, running: true,
			wantState: model.DeliveryRetrying, signal: true, enabled: true},
		{name: "exhausted, signaled", state: model.DeliveryExhausted, running: true,
			wantState: model.DeliveryDelivering, signal: true, enabled: true},
		{name: "delivered, run again", state: model.DeliveryDelivered,
			wantState: model.DeliveryDelivering, start: true, enabled: true},
		{name: "run again, a concurrent retry started it first", state: model.DeliveryExhausted,
			startErr:  serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "r"),
			wantState: model.DeliveryDelivering, enabled: true},
		{name: "delivering, joined", state: model.DeliveryDelivering, running: true,
			wantState: model.DeliveryDelivering, signal: true, enabled: true},
		{name: "delivering, no run yet", state: model.DeliveryDelivering,
			wantState: model.DeliveryDelivering, enabled: true},
		{name: "delivering, temporal down", state: model.DeliveryDelivering, sigErr: unavailable, wantErr: dispatch.ErrTemporal,
			wantState: model.DeliveryDelivering, enabled: true},
		{name: "signal refused, state restored", state: model.DeliveryExhausted, sigErr: unavailable, wantErr: dispatch.ErrTemporal,
			wantState: model.DeliveryExhausted, enabled: true},
		{name: "start refused, state restored", state: model.DeliveryDelivered, startErr: unavailable, wantErr: dispatch.ErrTemporal,
			wantState: model.DeliveryDelivered, enabled: true},
		{name: "canceled", state: model.DeliveryCanceled, wantErr: dispatch.ErrCanceled,
			wantState: model.DeliveryCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ref := f.delivery(t, tc.state, 3)
			id := workflows.DeliveryWorkflowID(ref.EventID, ref.WebhookID)
			if tc.running {
				f.tc.run(id, nil)
			}
			if tc.sigErr != nil {
				f.tc.signalErr = func(string) error { return tc.sigErr }
			}
			if tc.startErr != nil {
				f.tc.startErr = func(string) error { return tc.startErr }
			}
			f.disable(t)

			got, err := f.d.Resend(dispatch.WithAskedAt(t.Context(), askedAt), f.db, f.hook.ID, ref.DeliveryID)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Resend error = %v, want %v", err, tc.wantErr)
			}
			if got.DeliveryID != ref.DeliveryID {
				t.Errorf("Resend answered delivery %d, want %d", got.DeliveryID, ref.DeliveryID)
			}
			d := f.load(t, ref.DeliveryID)
			if d.State != tc.wantState || d.ClaimedAt != nil {
				t.Errorf("delivery after resend: state %s, claimed %v; want %s, no claim", d.State, d.ClaimedAt, tc.wantState)
			}
			if enabled := !f.disabled(t); enabled != tc.enabled {
				t.Errorf("webhook enabled = %v, want %v", enabled, tc.enabled)
			}
			signals := f.tc.signalsTo(id)
			if got := len(signals) == 1; got != tc.signal {
				t.Fatalf("%d retry signals, want signaled %v", len(signals), tc.signal)
			}
			if tc.signal {
				if signals[0].name != workflows.SignalRetry || signals[0].arg != (workflows.RetryRequest{AskedAt: askedAt}) {
					t.Errorf("signal %s %v, want %s with AskedAt %v", signals[0].name, signals[0].arg, workflows.SignalRetry, askedAt)
				}
			}
			starts := f.tc.startsOf(id)
			if got := len(starts) == 1; got != tc.start {
				t.Fatalf("%d starts, want started %v", len(starts), tc.start)
			}
			if tc.start {
				in, ok := starts[0].args[0].(workflows.DeliveryInput)
				if !ok || in.PriorAttempts != 3 || in.DeliveryID != ref.DeliveryID {
					t.Errorf("new run's input %+v, want delivery %d after 3 attempts", starts[0].args[0], ref.DeliveryID)
				}
				if starts[0].opts.WorkflowIDReusePolicy != enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
					t.Errorf("new run's reuse policy %v", starts[0].opts.WorkflowIDReusePolicy)
				}
			}
			if tc.wantErr == nil && tc.state != model.DeliveryDelivering && d.DispatchedAt == nil {
				t.Error("a resent delivery is not marked dispatched: the sweeper would start it again")
			}
		})
	}
}

// TestResendRefusals: a delivery of another webhook, or none, is not found; one another retry has
// claimed is left to it.
func TestResendRefusals(t *testing.T) {
	f := newFixture(t)
	ref := f.delivery(t, model.DeliveryExhausted, 1)
	other := f.webhook(t, f.hook.AccountID)
	for _, tc := range []struct {
		name              string
		webhook, delivery int64
	}{
		{"another webhook's delivery", other.ID, ref.DeliveryID},
		{"no such delivery", f.hook.ID, ref.DeliveryID + 100},
	} {
		if _, err := f.d.Resend(t.Context(), f.db, tc.webhook, tc.delivery); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("%s: Resend error = %v, want model.ErrNotFound", tc.name, err)
		}
	}

	claimedAt := model.Now()
	f.claim(t, ref.DeliveryID, model.DeliveryExhausted, claimedAt)
	f.tc.run(workflows.DeliveryWorkflowID(ref.EventID, ref.WebhookID), nil)
	if _, err := f.d.Resend(t.Context(), f.db, f.hook.ID, ref.DeliveryID); err != nil {
		t.Fatalf("resend of a claimed delivery: %v", err)
	}
	if n := len(f.tc.signals) + len(f.tc.starts); n != 0 {
		t.Fatalf("a claimed delivery reached Temporal %d times, want 0: the claim's holder hands it over", n)
	}
	if d := f.load(t, ref.DeliveryID); d.ClaimedAt == nil || !d.ClaimedAt.Equal(claimedAt) {
		t.Fatalf("another retry's claim = %v, want %v kept", d.ClaimedAt, claimedAt)
	}
}

// TestResendWithoutAskedAt: a resend without WithAskedAt signals the time of the call.
func TestResendWithoutAskedAt(t *testing.T) {
	f := newFixture(t)
	ref := f.delivery(t, model.DeliveryRetrying, 1)
	id := workflows.DeliveryWorkflowID(ref.EventID, ref.WebhookID)
	f.tc.run(id, nil)
	before := model.Now()
	if _, err := f.d.Resend(t.Context(), f.db, f.hook.ID, ref.DeliveryID); err != nil {
		t.Fatal(err)
	}
	s := f.tc.signalsTo(id)
	if len(s) != 1 {
		t.Fatalf("%d signals, want 1", len(s))
	}
	req, ok := s[0].arg.(workflows.RetryRequest)
	if !ok || req.AskedAt.Before(before) || req.AskedAt.After(model.Now()) {
		t.Fatalf("signal payload %v, want a RetryRequest asked at the call", s[0].arg)
	}
}

// TestRecover: a recovery starts one RecoverWorkflow with its answer in the memo; identical
// requests answer as the running one did, from its memo, whether they count deliveries of their
// own or none; a request with nothing to recover and no recovery running starts nothing.
func TestRecover(t *testing.T) {
	since := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

	t.Run("nothing to recover", func(t *testing.T) {
		f := newFixture(t)
		f.delivery(t, model.DeliveryDelivered, 1)
		f.disable(t)
		before := model.Now()
		got, err := f.d.Recover(t.Context(), f.db, model.Recovery{WebhookID: f.hook.ID, Since: since}, model.Now())
		if err != nil || got.WorkflowID != "" || got.Queued != 0 || got.Until.Before(before) {
			t.Fatalf("Recover = %+v, %v; want no workflow, until now", got, err)
		}
		if len(f.tc.starts) != 0 {
			t.Fatal("a recovery with nothing to recover started a workflow")
		}
		if f.disabled(t) {
			t.Fatal("the webhook is still disabled after a recovery")
		}
	})

	t.Run("started, then joined", func(t *testing.T) {
		f := newFixture(t)
		a := f.delivery(t, model.DeliveryExhausted, 5)
		b := f.delivery(t, model.DeliveryRetrying, 2)
		f.delivery(t, model.DeliveryDelivered, 1)
		until := model.Now().Add(time.Hour)
		r := model.Recovery{WebhookID: f.hook.ID, Since: since, Until: until}
		first, err := f.d.Recover(t.Context(), f.db, r, model.Now())
		want := dispatch.Recovering{WorkflowID: workflows.RecoverWorkflowID(f.hook.ID, since, until), Queued: 2, Until: until, UpTo: b.DeliveryID}
		if err != nil || !sameRecovering(first, want) {
			t.Fatalf("Recover = %+v, %v; want %+v", first, err, want)
		}
		starts := f.tc.startsOf(want.WorkflowID)
		in := workflows.RecoverInput{WebhookID: f.hook.ID, Since: since, Until: until, UpTo: b.DeliveryID}
		if len(starts) != 1 || starts[0].args[0] != in {
			t.Fatalf("starts %+v, want one with %+v", starts, in)
		}

		// The recovery has claimed one, and two new deliveries have failed: the same request
		// still answers the running recovery's count (2), not its own (3).
		f.claim(t, a.DeliveryID, model.DeliveryDelivering, model.Now())
		f.delivery(t, model.DeliveryExhausted, 5)
		f.delivery(t, model.DeliveryExhausted, 5)
		if again, err := f.d.Recover(t.Context(), f.db, r, model.Now()); err != nil || !sameRecovering(again, first) {
			t.Fatalf("identical request = %+v, %v; want the running recovery's %+v", again, err, first)
		}
		// All delivered since: nothing of its own to count, it still answers the running recovery.
		if _, err := f.db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", model.DeliveryDelivered).
			Where("webhook_id = ?", f.hook.ID).Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
		if again, err := f.d.Recover(t.Context(), f.db, r, model.Now()); err != nil || !sameRecovering(again, first) {
			t.Fatalf("identical request with nothing left = %+v, %v; want the running recovery's %+v", again, err, first)
		}
		// Once it has ended, the same request with nothing to recover answers none.
		f.tc.runs[want.WorkflowID].status = enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
		if after, err := f.d.Recover(t.Context(), f.db, r, model.Now()); err != nil || after.WorkflowID != "" || after.Queued != 0 {
			t.Fatalf("after the recovery ended = %+v, %v; want no workflow", after, err)
		}
	})

	t.Run("run without a memo", func(t *testing.T) {
		f := newFixture(t)
		f.delivery(t, model.DeliveryExhausted, 5)
		until := model.Now().Add(time.Hour)
		id := workflows.RecoverWorkflowID(f.hook.ID, since, until)
		f.tc.run(id, nil)
		got, err := f.d.Recover(t.Context(), f.db, model.Recovery{WebhookID: f.hook.ID, Since: since, Until: until}, model.Now())
		if err != nil || got.WorkflowID != id || got.Queued != 1 {
			t.Fatalf("Recover = %+v, %v; want its own count of 1 under %s", got, err, id)
		}
		// With nothing to count, a running recovery without a memo answers none.
		if _, err := f.db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", model.DeliveryDelivered).
			Where("webhook_id = ?", f.hook.ID).Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, err := f.d.Recover(t.Context(), f.db, model.Recovery{WebhookID: f.hook.ID, Since: since, Until: until}, model.Now()); err != nil || got.WorkflowID != "" {
			t.Fatalf("Recover = %+v, %v; want no workflow", got, err)
		}
	})

	t.Run("temporal down", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			state string
			setup func(*fakeTemporal)
		}{
			{"start", model.DeliveryExhausted, func(tc *fakeTemporal) { tc.startErr = func(string) error { return unavailable } }},
			{"describe after start", model.DeliveryExhausted, func(tc *fakeTemporal) { tc.describe = unavailable }},
			{"describe with nothing to recover", model.DeliveryDelivered, func(tc *fakeTemporal) { tc.describe = unavailable }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newFixture(t)
				f.delivery(t, tc.state, 5)
				tc.setup(f.tc)
				if _, err := f.d.Recover(t.Context(), f.db, model.Recovery{WebhookID: f.hook.ID, Since: since}, model.Now()); !errors.Is(err, dispatch.ErrTemporal) {
					t.Fatalf("Recover error = %v, want ErrTemporal", err)
				}
			})
		}
	})
}

func sameRecovering(a, b dispatch.Recovering) bool {
	return a.WorkflowID == b.WorkflowID && a.Queued == b.Queued && a.UpTo == b.UpTo && a.Until.Equal(b.Until)
}

// TestRepairClaims: the sweeper hands each delivery a crashed retry left claimed before the
// cut-off to its workflow (a signal if it runs, a new run if not), counts them under repair and
// marks them dispatched; a claimed delivery whose workflow has ended since only loses its claim;
// a claim after the cut-off is left alone. It pages through more claims than one read holds.
func TestRepairClaims(t *testing.T) {
	f := newFixture(t)
	starts, err := dispatch.NewStartsMetric(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f.d.Starts = starts
	cutoff := model.Now()
	stale := cutoff.Add(-time.Minute)

	running := f.delivery(t, model.DeliveryRetrying, 2)
	f.claim(t, running.DeliveryID, model.DeliveryRetrying, stale)
	f.tc.run(workflows.DeliveryWorkflowID(running.EventID, running.WebhookID), nil)
	ended := f.delivery(t, model.DeliveryExhausted, 5)
	f.claim(t, ended.DeliveryID, model.DeliveryDelivering, stale)
	var settled []model.DeliveryRef
	for _, state := range []string{model.DeliveryDelivered, model.DeliveryExhausted, model.DeliveryCanceled} {
		r := f.delivery(t, state, 1)
		f.claim(t, r.DeliveryID, state, stale)
		settled = append(settled, r)
	}
	fresh := f.delivery(t, model.DeliveryExhausted, 5)
	f.claim(t, fresh.DeliveryID, model.DeliveryDelivering, cutoff.Add(time.Minute))
	// More than one page of stale claims (200 a read), all on workflows that have ended.
	var many []model.DeliveryRef
	for range 201 {
		r := f.delivery(t, model.DeliveryExhausted, 5)
		f.claim(t, r.DeliveryID, model.DeliveryDelivering, stale)
		many = append(many, r)
	}

	n, err := f.d.RepairClaims(t.Context(), f.db, cutoff)
	if want := 2 + len(many); err != nil || n != want {
		t.Fatalf("RepairClaims = %d, %v; want %d", n, err, want)
	}
	if got := testutil.ToFloat64(starts.WithLabelValues(string(dispatch.StartedByRepair))); got != float64(n) {
		t.Errorf("repair starts counted %v, want %d", got, n)
	}
	if s := f.tc.signalsTo(workflows.DeliveryWorkflowID(running.EventID, running.WebhookID)); len(s) != 1 || s[0].arg != nil {
		t.Errorf("running workflow got %v, want one retry signal without payload", s)
	}
	for _, r := range append([]model.DeliveryRef{ended}, many...) {
		st := f.tc.startsOf(workflows.DeliveryWorkflowID(r.EventID, r.WebhookID))
		if len(st) != 1 || st[0].args[0].(workflows.DeliveryInput).PriorAttempts != 5 {
			t.Fatalf("delivery %d: starts %+v, want one new run after 5 attempts", r.DeliveryID, st)
		}
	}
	for _, r := range append([]model.DeliveryRef{running, ended}, many...) {
		if d := f.load(t, r.DeliveryID); d.ClaimedAt != nil || d.DispatchedAt == nil {
			t.Fatalf("handed delivery %d: claimed %v, dispatched %v; want no claim, dispatched", r.DeliveryID, d.ClaimedAt, d.DispatchedAt)
		}
	}
	for _, r := range settled {
		id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
		if len(f.tc.signalsTo(id))+len(f.tc.startsOf(id)) != 0 {
			t.Errorf("delivery %s %d was handed over; its workflow ran since", r.State, r.DeliveryID)
		}
		if d := f.load(t, r.DeliveryID); d.ClaimedAt != nil || d.State != r.State {
			t.Errorf("settled delivery %d: claimed %v, state %s; want no claim, %s", r.DeliveryID, d.ClaimedAt, d.State, r.State)
		}
	}
	if d := f.load(t, fresh.DeliveryID); d.ClaimedAt == nil {
		t.Error("a claim after the cut-off was repaired")
	}
	id := workflows.DeliveryWorkflowID(fresh.EventID, fresh.WebhookID)
	if len(f.tc.signalsTo(id))+len(f.tc.startsOf(id)) != 0 {
		t.Error("a delivery claimed after the cut-off was handed over")
	}

	// Nothing stale is left: a second sweep repairs nothing.
	if n, err := f.d.RepairClaims(t.Context(), f.db, cutoff); err != nil || n != 0 {
		t.Fatalf("second RepairClaims = %d, %v; want 0", n, err)
	}
}

// TestRepairClaimsTemporalDown: a hand-over Temporal refuses stops the sweep with the error; what
// was handed before it counts and loses its claim, the refused one keeps its claim for the next
// sweep.
func TestRepairClaimsTemporalDown(t *testing.T) {
	f := newFixture(t)
	cutoff := model.Now()
	first := f.delivery(t, model.DeliveryRetrying, 1)
	f.claim(t, first.DeliveryID, model.DeliveryRetrying, cutoff.Add(-2*time.Minute))
	f.tc.run(workflows.DeliveryWorkflowID(first.EventID, first.WebhookID), nil)
	refused := f.delivery(t, model.DeliveryRetrying, 1)
	f.claim(t, refused.DeliveryID, model.DeliveryRetrying, cutoff.Add(-time.Minute))
	refusedID := workflows.DeliveryWorkflowID(refused.EventID, refused.WebhookID)
	f.tc.signalErr = func(id string) error {
		if id == refusedID {
			return unavailable
		}
		return nil
	}

	n, err := f.d.RepairClaims(t.Context(), f.db, cutoff)
	if n != 1 || !errors.Is(err, unavailable) {
		t.Fatalf("RepairClaims = %d, %v; want 1 and Temporal's error", n, err)
	}
	if d := f.load(t, first.DeliveryID); d.ClaimedAt != nil {
		t.Error("the delivery handed over before the error kept its claim")
	}
	if d := f.load(t, refused.DeliveryID); d.ClaimedAt == nil {
		t.Error("the refused delivery lost its claim: no sweep would hand it over again")
	}
}
