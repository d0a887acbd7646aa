//go:build integration

package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/worker"
	"github.com/webhookd/webhookd/workflows"
)

// TestRetentionSchedule runs the real retention schedule on the Temporal dev server against
// PostgreSQL: the worker creates the schedule at start, a trigger runs it (continuing as new when
// its batch bound is reached), expired rows go and the others stay, and the runs are there to be
// found in Temporal. Then: replicas ensuring the schedule at once neither fail nor rewrite it, a
// new retention reaches it without undoing an operator's pause, and retention off deletes it.
func TestRetentionSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := dbtest.Postgres(t)
	tc := temporaltest.Start(t).Client(t)
	queue := fmt.Sprintf("it-retention-%d", time.Now().UnixNano())
	scheduleID := workflows.RetentionScheduleID(queue)
	handle := tc.ScheduleClient().GetHandle(ctx, scheduleID)
	t.Cleanup(func() { _ = handle.Delete(context.Background()) })

	_, acc, err := model.CreateAPIKey(ctx, db, "retention@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	hook := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
		Status: model.StatusActive, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, hook, 100); err != nil {
		t.Fatal(err)
	}
	days := func(n int) time.Time { return now.Add(-time.Duration(n) * 24 * time.Hour) }
	// store writes an event with one delivery (state "" for none) and its attempts.
	store := func(age int, state string, attempts int) (eventID, deliveryID int64) {
		t.Helper()
		at := days(age)
		ev := &model.Event{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured", Data: `{}`, OccurredAt: at, CreatedAt: at}
		if _, err := db.NewInsert().Model(ev).Returning("id").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if state == "" {
			return ev.ID, 0
		}
		d := &model.Delivery{EventID: ev.ID, WebhookID: hook.ID, State: state, Attempts: attempts, DispatchedAt: &at, CreatedAt: at, UpdatedAt: at}
		if _, err := db.NewInsert().Model(d).Returning("id").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= attempts; i++ {
			a := &model.Attempt{DeliveryID: d.ID, Attempt: i, URL: hook.URL, StartedAt: at, LatencyMS: 3}
			if _, err := db.NewInsert().Model(a).Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return ev.ID, d.ID
	}
	var expiredEvents, keptEvents []int64
	for range 3 {
		e, _ := store(40, model.DeliveryDelivered, 2)
		expiredEvents = append(expiredEvents, e)
	}
	e, _ := store(35, model.DeliveryExhausted, 3)
	expiredEvents = append(expiredEvents, e)
	e, _ = store(31, "", 0)
	expiredEvents = append(expiredEvents, e)
	e, unfinished := store(50, model.DeliveryRetrying, 1) // its workflow may still be at work
	keptEvents = append(keptEvents, e)
	e, young := store(10, model.DeliveryDelivered, 1)
	keptEvents = append(keptEvents, e)

	// Batches of 2 and at most 2 per run: 9 expired attempts alone take several runs, chained by
	// continue-as-new.
	retention := worker.Retention{Keep: 720 * time.Hour, BatchSize: 2, MaxBatches: 2}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stopWorker := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(runCtx, worker.Config{
			Client: tc, TaskQueue: queue, DB: db.DB, Activities: &activities.Activities{DB: db, Log: logger},
			Dispatcher: &dispatch.Dispatcher{Client: tc, TaskQueue: queue}, Logger: logger, SweepInterval: time.Second,
			MaxConcurrentDeliveries: 4, MaxConcurrentRetries: 2, Retention: retention,
		})
	}()
	t.Cleanup(func() {
		stopWorker()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})

	// The worker created the schedule at start.
	var desc *client.ScheduleDescription
	eventually(t, 30*time.Second, "schedule "+scheduleID, func() bool {
		desc, err = handle.Describe(ctx)
		return err == nil
	})
	action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	if !ok || action.Workflow != "Retention" || action.TaskQueue != queue || action.ID != scheduleID {
		t.Fatalf("schedule action = %+v", desc.Schedule.Action)
	}
	if in := decodeRetentionInput(t, action); in != (workflows.RetentionInput{Retention: 720 * time.Hour, BatchSize: 2, MaxBatches: 2}) {
		t.Fatalf("schedule input = %+v", in)
	}
	if iv := desc.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != time.Hour ||
		desc.Schedule.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP || desc.Schedule.State.Paused {
		t.Fatalf("schedule spec %+v, policy %+v, state %+v", desc.Schedule.Spec, desc.Schedule.Policy, desc.Schedule.State)
	}

	// Run it now instead of in an hour.
	if err := handle.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	countIn := func(table, column string, ids []int64) int {
		n, err := db.NewSelect().Table(table).Where("? IN (?)", bun.Ident(column), bun.List(ids)).Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	eventually(t, time.Minute, "expired rows purged", func() bool { return countIn("events", "id", expiredEvents) == 0 })
	if n := countIn("events", "id", keptEvents); n != len(keptEvents) {
		t.Errorf("%d of %d events to keep are left", n, len(keptEvents))
	}
	if n := countIn("delivery_attempts", "delivery_id", []int64{unfinished, young}); n != 2 {
		t.Errorf("%d attempts of the unfinished and the young delivery are left, want 2", n)
	}
	if n, err := db.NewSelect().Table("delivery_attempts").Count(ctx); err != nil || n != 2 {
		t.Errorf("%d attempts left in all, %v; want 2", n, err)
	}
	if n, err := db.NewSelect().Table("deliveries").Count(ctx); err != nil || n != 2 {
		t.Errorf("%d deliveries left in all, %v; want 2", n, err)
	}

	// The runs are in Temporal like every other workflow: the schedule names its run, the
	// namespace lists its runs (a chain of continued-as-new runs ending Completed), and the last
	// run's result says what it deleted.
	eventually(t, 30*time.Second, "the schedule's recent action", func() bool {
		desc, err = handle.Describe(ctx)
		return err == nil && len(desc.Info.RecentActions) > 0 && desc.Info.RecentActions[0].StartWorkflowResult != nil
	})
	wfID := desc.Info.RecentActions[0].StartWorkflowResult.WorkflowID
	var res workflows.RetentionResult
	if err := tc.GetWorkflow(ctx, wfID, "").Get(ctx, &res); err != nil {
		t.Fatalf("result of %s: %v", wfID, err)
	}
	if res.Batches < 1 || !res.Before.Before(days(29)) || !res.Before.After(days(31)) {
		t.Errorf("last run's result %+v", res)
	}
	statuses := map[enumspb.WorkflowExecutionStatus]int{}
	eventually(t, 30*time.Second, "the runs in the workflow list", func() bool {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf("TemporalScheduledById = '%s' AND WorkflowType = 'Retention'", scheduleID)})
		if err != nil {
			return false
		}
		clear(statuses)
		for _, ex := range resp.Executions {
			if ex.Execution.WorkflowId == wfID && ex.TaskQueue == queue {
				statuses[ex.Status]++
			}
		}
		return statuses[enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED] == 1 && statuses[enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW] >= 1
	})
	wf, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
	if err != nil || wf.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED || wf.WorkflowExecutionInfo.Type.Name != "Retention" {
		t.Fatalf("describe %s: %v, %v", wfID, wf, err)
	}
	t.Logf("%s: runs by status %v, last run %+v", wfID, statuses, res)

	// Replicas starting at once with the same config: no error, and nothing to rewrite.
	before, err := handle.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ensureConcurrently(t, ctx, tc, queue, retention)
	after, err := handle.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Info.LastUpdateAt.Equal(before.Info.LastUpdateAt) {
		t.Errorf("ensuring an unchanged schedule rewrote it: last update %v, was %v", after.Info.LastUpdateAt, before.Info.LastUpdateAt)
	}

	// An operator pauses it; a release with a new retention updates the action and keeps the pause.
	if err := handle.Pause(ctx, client.SchedulePauseOptions{Note: "paused by the test"}); err != nil {
		t.Fatal(err)
	}
	retention.Keep = 1000 * time.Hour
	ensureConcurrently(t, ctx, tc, queue, retention)
	after, err = handle.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if in := decodeRetentionInput(t, after.Schedule.Action.(*client.ScheduleWorkflowAction)); in.Retention != 1000*time.Hour {
		t.Errorf("schedule input after the update = %+v", in)
	}
	if !after.Schedule.State.Paused || after.Schedule.State.Note != "paused by the test" {
		t.Errorf("the update undid the operator's pause: %+v", after.Schedule.State)
	}

	// Retention off: the schedule goes, and turning it off again is no error.
	for range 2 {
		if err := worker.EnsureRetentionSchedule(ctx, tc, queue, worker.Retention{}); err != nil {
			t.Fatal(err)
		}
	}
	var nf *serviceerror.NotFound
	if _, err := handle.Describe(ctx); !errors.As(err, &nf) {
		t.Errorf("describe after retention off: %v, want not found", err)
	}
}

// ensureConcurrently does what several worker replicas starting at once do.
func ensureConcurrently(t *testing.T, ctx context.Context, c client.Client, queue string, r worker.Retention) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- worker.EnsureRetentionSchedule(ctx, c, queue, r) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("replica ensuring the schedule: %v", err)
		}
	}
}

func decodeRetentionInput(t *testing.T, a *client.ScheduleWorkflowAction) workflows.RetentionInput {
	t.Helper()
	var in workflows.RetentionInput
	if len(a.Args) != 1 {
		t.Fatalf("schedule args = %v", a.Args)
	}
	p, ok := a.Args[0].(*commonpb.Payload)
	if !ok {
		t.Fatalf("schedule arg is a %T", a.Args[0])
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &in); err != nil {
		t.Fatal(err)
	}
	return in
}
