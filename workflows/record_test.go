//go:build record

// Generators, not tests: built only with -tags record, they run the real workflows on a Temporal
// dev server with stand-in activities and write the histories that the replay tests replay.
//
//	go test -tags record -run TestRecord -count=1 ./workflows/
package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRecordHistories is a generator, not a test: it runs the real
// DeliveryWorkflow on a Temporal dev server, with stand-in activities registered under the real
// activities' names and a schedule of 100 ms delays, and writes each run's history to
// testdata/delivery-<scenario>.json for TestReplayDeliveryHistories. There is one scenario for
// each shape a delivery's history can take. Before the first release a change to the workflow's
// shape re-records them all and deletes the files of shapes that no longer exist; after it, the
// old shape's files stay until its branch is deleted (docs/operations.md, "Changing a workflow's
// shape").
//
//	go test -tags record -run TestRecordHistories -count=1 ./workflows/
func TestRecordHistories(t *testing.T) {
	srv := temporaltest.Start(t)
	c := srv.Client(t)
	queue := fmt.Sprintf("record-histories-%d", time.Now().UnixNano())

	// The stand-ins answer by delivery id, so each scenario's outcome is fixed by its input.
	const (
		// delivered: the first attempt, a local activity, delivers.
		delivered = 1
		// retried: the local first attempt fails, the second (on the retry queue) too, the third
		// delivers.
		retried = 2
		// busy: the local first attempt finds the database down (a retried error), then gets a
		// 429 asking for a longer wait; the second attempt is held back at a busy host, sleeps
		// until its turn, and delivers.
		busy = 3
		// handBack: the local first attempt finds its host busy and hands the attempt back; the
		// same attempt as a regular activity waits for the host once, then delivers.
		handBack = 4
		// exhausted: every scheduled attempt fails, the owner is alerted, and the retry signal's
		// attempt delivers.
		exhausted = 5
		// held: the second attempt finds the webhook disabled and is held, without an alert; the
		// retry signal's attempt waits for a busy host once, then delivers.
		held = 6
		// testEvent: a webhook.test that fails: exhausted at once, and its retry window ends.
		testEvent = 7
		// internalError: Deliver fails with an error no retry can fix (an unreadable secret).
		internalError = 8
		// canceled: fails every scheduled attempt, then its workflow is canceled in the retry
		// window (the webhook was deleted).
		canceled = 9
		// windowEnded: fails every scheduled attempt; when its retry window closes, its webhook
		// turns out deleted (a delete that could not cancel the workflow).
		windowEnded = 10
		// resendDelivered: the local first attempt fails; while the second delivers, a retry
		// signal (a resend) comes in, and a third attempt delivers it again.
		resendDelivered = 11
		// rerun: a new run started by a manual retry after three attempts: its first attempt,
		// the fourth, is a regular activity on the retry queue, and delivers.
		rerun = 12
		// settled: its only attempt fails; in the retry window a resend asked before that attempt
		// comes in, asks for nothing more and is settled; the window ends.
		settled = 13
		// limits: the local first attempt and the regular one it hands back are held back, the
		// second until a turn an hour away; a limits signal (the webhook's rate limit changed) ends
		// the wait, and the attempt made at once delivers.
		limits = 14
		// handBackFar: the local first attempt is held back with a turn further out than a regular
		// attempt may wait for it (the attempt timeout and the record's margin): the workflow sleeps
		// until the turn, then makes the attempt as a regular activity, which delivers.
		handBackFar = 15
		// orderedDelivered: an ordered webhook's delivery (number 4 of lane 3) that delivers at
		// once, then starts its lane's next (AdvanceLane).
		orderedDelivered = 16
		// orderedSkipped: an ordered webhook's delivery that runs out of its schedule and waits for
		// its owner, who skips it (its workflow is canceled): it starts its lane's next too.
		orderedSkipped = 17
	)
	heldLong := make(chan struct{}, 1)
	resendAsked := make(chan struct{}, 1)
	alertSent := make(chan int64, 4)
	// A regular attempt held back at a busy receiver: it comes back for its turn.
	hostBusy := activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "receiver host busy", RetryIn: 200 * time.Millisecond}
	var callsMu sync.Mutex
	calls := map[[2]int64]int{} // by delivery and attempt: how many times the activity ran
	deliver := func(ctx context.Context, in activities.DeliverInput) (activities.DeliverResult, error) {
		now := time.Now().UTC()
		info := activity.GetInfo(ctx)
		callsMu.Lock()
		calls[[2]int64{in.DeliveryID, int64(in.Attempt)}]++
		call := calls[[2]int64{in.DeliveryID, int64(in.Attempt)}]
		callsMu.Unlock()
		ok := activities.DeliverResult{Delivered: true, StatusCode: 204, AttemptedAt: now}
		tooMany := activities.DeliverResult{StatusCode: 429, ErrorClass: activities.ClassHTTPStatus, Error: "receiver answered 429",
			AttemptedAt: now, NextAttemptIn: 3 * in.NextAttemptIn}
		failed := activities.DeliverResult{StatusCode: 503, ErrorClass: activities.ClassHTTPStatus, Error: "receiver answered 503",
			AttemptedAt: now, NextAttemptIn: in.NextAttemptIn}
		switch in.DeliveryID {
		case delivered:
			return ok, nil
		case retried:
			if in.Attempt == 3 {
				return ok, nil
			}
		case busy:
			switch {
			case in.Attempt == 1 && call == 1:
				return activities.DeliverResult{}, errors.New("update delivery: connection refused")
			case in.Attempt == 1:
				return tooMany, nil
			case call == 1:
				return hostBusy, nil
			}
			return ok, nil
		case handBack:
			switch {
			case info.IsLocalActivity:
				return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "receiver host busy", RetryIn: 200 * time.Millisecond}, nil
			case call == 2:
				return hostBusy, nil
			}
			return ok, nil
		case exhausted:
			if in.Attempt == 3 {
				return ok, nil
			}
		case held:
			switch {
			case in.Attempt == 2:
				alertSent <- in.DeliveryID // nobody is alerted about a held delivery: this tells the recorder to signal
				return activities.DeliverResult{WebhookDisabled: true, Error: "the webhook is disabled"}, nil
			case in.Attempt == 3 && call == 1:
				return hostBusy, nil
			case in.Attempt == 3:
				return ok, nil
			}
		case internalError:
			return activities.DeliverResult{}, temporal.NewNonRetryableApplicationError("delivery 8: the webhook's signing secret cannot be opened",
				activities.ErrTypeSecretUnreadable, nil)
		case resendDelivered:
			if in.Attempt == 2 {
				resendAsked <- struct{}{}
				time.Sleep(time.Second) // the recorder signals meanwhile
			}
			if in.Attempt >= 2 {
				return ok, nil
			}
		case rerun, orderedDelivered:
			return ok, nil
		case handBackFar:
			if info.IsLocalActivity {
				return activities.DeliverResult{HostBusy: true, HeldBy: "host_cap", Error: "receiver host busy", RetryIn: 11 * time.Second}, nil
			}
			return ok, nil
		case limits:
			switch call {
			case 1:
				return activities.DeliverResult{HostBusy: true, HeldBy: "rate_limit", Error: "endpoint rate limit", RetryIn: 200 * time.Millisecond}, nil
			case 2:
				heldLong <- struct{}{}
				return activities.DeliverResult{HostBusy: true, HeldBy: "rate_limit", Error: "endpoint rate limit", RetryIn: time.Hour}, nil
			}
			return ok, nil
		}
		return failed, nil
	}
	// The exhaustion records a notice (numbered as its delivery, here) whose start tells the recorder.
	markExhausted := func(_ context.Context, in activities.ExhaustedInput) (activities.ExhaustedResult, error) {
		return activities.ExhaustedResult{Alert: true, Notices: []int64{in.DeliveryID}}, nil
	}
	startNotice := func(_ context.Context, id int64) error {
		alertSent <- id
		return nil
	}

	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.DeliveryWorkflow)
	// The real activities are methods of *activities.Activities; Temporal names them by method name.
	w.RegisterActivityWithOptions(deliver, activity.RegisterOptions{Name: "Deliver"})
	w.RegisterActivityWithOptions(markExhausted, activity.RegisterOptions{Name: "MarkExhausted"})
	w.RegisterActivityWithOptions(startNotice, activity.RegisterOptions{Name: workflows.ActivityStartEventDeliveries})
	w.RegisterActivityWithOptions(func(context.Context, activities.SettleInput) error { return nil }, activity.RegisterOptions{Name: "SettleClaim"})
	w.RegisterActivityWithOptions(func(context.Context, int64) error { return nil }, activity.RegisterOptions{Name: "CancelDelivery"})
	w.RegisterActivityWithOptions(func(context.Context, workflows.AdvanceLaneInput) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityAdvanceLane})
	w.RegisterActivityWithOptions(func(_ context.Context, id int64) (bool, error) { return id == windowEnded, nil },
		activity.RegisterOptions{Name: "CancelIfWebhookGone"})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	t.Cleanup(w.Stop)
	retries := worker.New(c, workflows.RetryTaskQueue(queue), worker.Options{DisableWorkflowWorker: true})
	retries.RegisterActivityWithOptions(deliver, activity.RegisterOptions{Name: "Deliver"})
	if err := retries.Start(); err != nil {
		t.Fatalf("start retry worker: %v", err)
	}
	t.Cleanup(retries.Stop)

	short := 100 * time.Millisecond
	// A resend asked for before the attempt it came in after: it asks for nothing more.
	late := workflows.RetryRequest{AskedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, sc := range []struct {
		name      string
		in        workflows.DeliveryInput
		signal    bool // send the retry signal once the owner was alerted (or the delivery held)
		payload   any  // the retry signal's payload
		wantState string
		wantTries int
		wantErr   string // the workflow fails with an application error of this type, or "canceled"
		resend    bool   // send the retry signal while the second attempt runs
		limits    bool   // send the limits signal once an attempt is held back for long
	}{
		{name: "delivered", in: workflows.DeliveryInput{DeliveryID: delivered, EventID: 101, WebhookID: 7, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, wantState: model.DeliveryDelivered, wantTries: 1},
		{name: "retried", in: workflows.DeliveryInput{DeliveryID: retried, EventID: 102, WebhookID: 7, EventType: "website.published",
			Schedule: []time.Duration{short, short, short}, RetryWindow: time.Hour}, wantState: model.DeliveryDelivered, wantTries: 3},
		{name: "busy", in: workflows.DeliveryInput{DeliveryID: busy, EventID: 103, WebhookID: 7, EventType: "website.published",
			Schedule: []time.Duration{short, short}, RetryWindow: time.Hour}, wantState: model.DeliveryDelivered, wantTries: 2},
		{name: "handback", in: workflows.DeliveryInput{DeliveryID: handBack, EventID: 104, WebhookID: 8, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, wantState: model.DeliveryDelivered, wantTries: 1},
		{name: "exhausted-retried", in: workflows.DeliveryInput{DeliveryID: exhausted, EventID: 105, WebhookID: 8, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, signal: true, wantState: model.DeliveryDelivered, wantTries: 3},
		{name: "held-retried", in: workflows.DeliveryInput{DeliveryID: held, EventID: 106, WebhookID: 9, EventType: "website.published",
			Schedule: []time.Duration{short, short, short}, RetryWindow: time.Hour}, signal: true, wantState: model.DeliveryDelivered, wantTries: 3},
		{name: "test-event", in: workflows.DeliveryInput{DeliveryID: testEvent, EventID: 107, WebhookID: 10, EventType: model.EventTest,
			Schedule: []time.Duration{short, short}, RetryWindow: 300 * time.Millisecond}, wantState: model.DeliveryExhausted, wantTries: 1},
		{name: "internal-error", in: workflows.DeliveryInput{DeliveryID: internalError, EventID: 108, WebhookID: 10, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, wantErr: activities.ErrTypeSecretUnreadable},
		{name: "canceled", in: workflows.DeliveryInput{DeliveryID: canceled, EventID: 109, WebhookID: 11, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, signal: true, wantErr: "canceled"},
		{name: "window-ended-webhook-gone", in: workflows.DeliveryInput{DeliveryID: windowEnded, EventID: 110, WebhookID: 12, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: 300 * time.Millisecond}, wantState: model.DeliveryCanceled, wantTries: 2},
		{name: "resend-during-delivered", in: workflows.DeliveryInput{DeliveryID: resendDelivered, EventID: 111, WebhookID: 13, EventType: "website.published",
			Schedule: []time.Duration{short, short}, RetryWindow: time.Hour}, resend: true, wantState: model.DeliveryDelivered, wantTries: 3},
		{name: "rerun", in: workflows.DeliveryInput{DeliveryID: rerun, EventID: 112, WebhookID: 13, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour, PriorAttempts: 3}, wantState: model.DeliveryDelivered, wantTries: 4},
		{name: "settled", in: workflows.DeliveryInput{DeliveryID: settled, EventID: 113, WebhookID: 14, EventType: "website.published",
			RetryWindow: 2 * time.Second}, signal: true, payload: late, wantState: model.DeliveryExhausted, wantTries: 1},
		{name: "limits", in: workflows.DeliveryInput{DeliveryID: limits, EventID: 114, WebhookID: 15, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, limits: true, wantState: model.DeliveryDelivered, wantTries: 1},
		{name: "handback-far", in: workflows.DeliveryInput{DeliveryID: handBackFar, EventID: 115, WebhookID: 16, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: time.Hour}, wantState: model.DeliveryDelivered, wantTries: 1},
		{name: "ordered-delivered", in: workflows.DeliveryInput{DeliveryID: orderedDelivered, EventID: 116, WebhookID: 17, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: workflows.LaneRetryWindow, Lane: 3, LaneSeq: 4}, wantState: model.DeliveryDelivered, wantTries: 1},
		{name: "ordered-skipped", in: workflows.DeliveryInput{DeliveryID: orderedSkipped, EventID: 117, WebhookID: 17, EventType: "website.published",
			Schedule: []time.Duration{short}, RetryWindow: workflows.LaneRetryWindow, Lane: 3, LaneSeq: 5}, signal: true, wantErr: "canceled"},
	} {
		t.Run(sc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sc.in.Variant = model.VariantB
			sc.in.AttemptTimeout = 5 * time.Second
			sc.in.RetryTaskQueue = workflows.RetryTaskQueue(queue)
			sc.in.Jitter = defaultJitter
			id := workflows.DeliveryWorkflowID(sc.in.EventID, sc.in.WebhookID)
			opts := client.StartWorkflowOptions{ID: id, TaskQueue: queue}
			if sc.in.PriorAttempts > 0 {
				// As dispatch starts a manual retry's new run; a first run starts without any.
				opts.TypedSearchAttributes = temporal.NewSearchAttributes(
					workflows.DeliverySearchAttributes(sc.in.WebhookID, sc.in.EventType, sc.in.Variant, model.DeliveryDelivering)...)
			}
			run, err := c.ExecuteWorkflow(ctx, opts, workflows.DeliveryWorkflow, sc.in)
			if err != nil {
				t.Fatalf("start %s: %v", id, err)
			}
			if sc.resend {
				select {
				case <-resendAsked:
				case <-ctx.Done():
					t.Fatalf("the second attempt of delivery %d never ran: %v", sc.in.DeliveryID, ctx.Err())
				}
				if err := c.SignalWorkflow(ctx, id, run.GetRunID(), workflows.SignalRetry, nil); err != nil {
					t.Fatalf("signal %s: %v", id, err)
				}
			}
			if sc.limits {
				select {
				case <-heldLong:
				case <-ctx.Done():
					t.Fatalf("delivery %d was never held back for long: %v", sc.in.DeliveryID, ctx.Err())
				}
				waitForTimer(ctx, t, c, id, run.GetRunID()) // the held result reached the workflow, which sleeps
				if err := c.SignalWorkflow(ctx, id, run.GetRunID(), workflows.SignalLimits, nil); err != nil {
					t.Fatalf("signal %s: %v", id, err)
				}
			}
			if sc.signal {
				select {
				case got := <-alertSent:
					if got != sc.in.DeliveryID {
						t.Fatalf("alert for delivery %d, want %d", got, sc.in.DeliveryID)
					}
				case <-ctx.Done():
					t.Fatalf("no alert for delivery %d: %v", sc.in.DeliveryID, ctx.Err())
				}
				if sc.wantErr == "canceled" {
					if err := c.CancelWorkflow(ctx, id, run.GetRunID()); err != nil {
						t.Fatalf("cancel %s: %v", id, err)
					}
				} else if err := c.SignalWorkflow(ctx, id, run.GetRunID(), workflows.SignalRetry, sc.payload); err != nil {
					t.Fatalf("signal %s: %v", id, err)
				}
			}
			var st workflows.DeliveryState
			if err := run.Get(ctx, &st); sc.wantErr == "canceled" {
				if !temporal.IsCanceledError(err) {
					t.Fatalf("run %s: err = %v, want canceled", id, err)
				}
			} else if sc.wantErr != "" {
				var appErr *temporal.ApplicationError
				if !errors.As(err, &appErr) || appErr.Type() != sc.wantErr {
					t.Fatalf("run %s: err = %v, want a %s failure", id, err, sc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			if sc.wantErr != "" {
				// The failure carries no result.
			} else if st.State != sc.wantState || st.Attempts != sc.wantTries {
				t.Fatalf("result %+v, want %s after %d attempts", st, sc.wantState, sc.wantTries)
			}
			if !sc.signal && sc.wantState == model.DeliveryExhausted {
				select { // the failed test event alerts its owner
				case <-alertSent:
				default:
					t.Fatalf("delivery %d was exhausted without an alert", sc.in.DeliveryID)
				}
			}
			for len(alertSent) > 0 {
				<-alertSent // an alert nobody waited for: the owner of a delivery whose window ended
			}

			hist, err := fetchHistory(ctx, c, id, run.GetRunID())
			if err != nil {
				t.Fatal(err)
			}
			data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
			if err != nil {
				t.Fatalf("encode history: %v", err)
			}
			file := filepath.Join("testdata", "delivery-"+sc.name+".json")
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			// What was just written must replay, or TestReplayDeliveryHistories would fail on it.
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflows.DeliveryWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(t), file); err != nil {
				t.Fatalf("replay the recorded %s: %v", file, err)
			}
			t.Logf("recorded %s: %d events", file, len(hist.Events))
		})
	}
}

// waitForTimer waits until the run has started a timer.
func waitForTimer(ctx context.Context, t *testing.T, c client.Client, id, runID string) {
	t.Helper()
	for {
		hist, err := fetchHistory(ctx, c, id, runID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist.Events {
			if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s started no timer: %v", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func fetchHistory(ctx context.Context, c client.Client, id, runID string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		hist.Events = append(hist.Events, ev)
	}
	if len(hist.Events) == 0 {
		return nil, errors.New("history of " + id + " is empty")
	}
	return hist, nil
}

// TestRecordWebsiteHistory is a generator like TestRecordHistories, for WebsitePublishWorkflow:
//
//	go test -tags record -run TestRecordWebsiteHistory -count=1 ./workflows/
func TestRecordWebsiteHistory(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-website-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.WebsitePublishWorkflow)
	w.RegisterActivityWithOptions(func(context.Context, activities.PublishWebsiteInput) (int64, error) { return 42, nil },
		activity.RegisterOptions{Name: "PublishScheduledWebsite"})
	w.RegisterActivityWithOptions(func(context.Context, int64) error { return nil },
		activity.RegisterOptions{Name: workflows.ActivityStartEventDeliveries})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WebsitePublishWorkflowID(7), TaskQueue: queue},
		workflows.WebsitePublishWorkflow, workflows.WebsitePublishInput{WebsiteID: 7, ScheduledAt: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	recordRun(ctx, t, c, run, websiteHistory)
}

// recordRun waits for run to complete and writes its history to file.
func recordRun(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun, file string) {
	t.Helper()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	hist, err := fetchHistory(ctx, c, run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s: %d events", file, len(hist.Events))
}

// TestRecordFanOutHistory is a generator like TestRecordHistories, for FanOutWorkflow, with a
// stand-in StartDeliveries that fails once (Temporal away) and then succeeds:
//
//	go test -tags record -run TestRecordFanOutHistory -count=1 ./workflows/
func TestRecordFanOutHistory(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-fanout-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.FanOutWorkflow)
	calls := 0
	w.RegisterActivityWithOptions(func(context.Context, workflows.FanOutInput) error {
		calls++
		if calls == 1 {
			return errors.New("start delivery:9:1: connection refused")
		}
		return nil
	}, activity.RegisterOptions{Name: "StartDeliveries"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.FanOutWorkflowID(9), TaskQueue: queue},
		workflows.FanOutWorkflow, workflows.FanOutInput{EventID: 9})
	if err != nil {
		t.Fatal(err)
	}
	recordRun(ctx, t, c, run, fanOutHistory)
}

// TestRecordRecoverHistory is a generator like TestRecordHistories, for RecoverWorkflow, with a
// stand-in RecoverDeliveries that fails once (Temporal away) and then retries 3 deliveries:
//
//	go test -tags record -run TestRecordRecoverHistory -count=1 ./workflows/
func TestRecordRecoverHistory(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-recover-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.RecoverWorkflow)
	calls := 0
	w.RegisterActivityWithOptions(func(context.Context, workflows.RecoverInput) (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("retry delivery:9:1: connection refused")
		}
		return 3, nil
	}, activity.RegisterOptions{Name: "RecoverDeliveries"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := workflows.RecoverInput{WebhookID: 7, Since: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), UpTo: 99}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.RecoverWorkflowID(in.WebhookID, in.Since, in.Until), TaskQueue: queue}, workflows.RecoverWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	recordRun(ctx, t, c, run, recoverHistory)
}

// TestRecordRetryWebhookHistory is a generator like TestRecordHistories, for RetryWebhookWorkflow,
// with a stand-in RetryExhausted that fails once (Temporal away) and then retries 3 deliveries:
//
//	go test -tags record -run TestRecordRetryWebhookHistory -count=1 ./workflows/
func TestRecordRetryWebhookHistory(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-retry-webhook-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.RetryWebhookWorkflow)
	calls := 0
	w.RegisterActivityWithOptions(func(context.Context, workflows.RetryWebhookInput) (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("retry delivery:9:7: connection refused")
		}
		return 3, nil
	}, activity.RegisterOptions{Name: "RetryExhausted"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := workflows.RetryWebhookInput{WebhookID: 7, UpTo: 99}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.RetryWebhookWorkflowID(in), TaskQueue: queue}, workflows.RetryWebhookWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	recordRun(ctx, t, c, run, retryWebhookHistory)
}

// TestRecordReplayHistory is a generator like TestRecordHistories, for ReplayWorkflow, with a
// stand-in ReplayDeliveries that fails once (Temporal away) and then sends 3 deliveries:
//
//	go test -tags record -run TestRecordReplayHistory -count=1 ./workflows/
func TestRecordReplayHistory(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("record-replay-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(workflows.ReplayWorkflow)
	calls := 0
	w.RegisterActivityWithOptions(func(context.Context, workflows.ReplayInput) (int, error) {
		calls++
		if calls == 1 {
			return 0, errors.New("retry delivery:9:7: connection refused")
		}
		return 3, nil
	}, activity.RegisterOptions{Name: workflows.ActivityReplayDeliveries})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := workflows.ReplayInput{ReplayID: 7}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d", workflows.ReplayWorkflowID(in.ReplayID), time.Now().UnixNano()), TaskQueue: queue}, workflows.ReplayWorkflow, in)
	if err != nil {
		t.Fatal(err)
	}
	recordRun(ctx, t, c, run, replayHistory)
}
