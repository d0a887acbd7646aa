package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
)

// fakeTemporal is the part of a Temporal client that retry, resend, recover and claim repair use:
// starts, signals and describes, kept in memory. A start of a workflow id that runs returns that
// run, as WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING does; a signal to one that does not run is
// NotFound. signalErr and startErr, when set, fail those calls instead. Any other method panics
// on the nil client.Client it embeds.
type fakeTemporal struct {
	client.Client

	mu        sync.Mutex
	runs      map[string]*fakeRun // the latest run of each workflow id
	starts    []fakeStart
	signals   []fakeSignal
	signalErr func(id string) error
	startErr  func(id string) error
	describe  error
}

type fakeStart struct {
	opts client.StartWorkflowOptions
	args []any
}

type fakeSignal struct {
	id, name string
	arg      any
}

type fakeRun struct {
	client.WorkflowRun
	id, runID string
	status    enums.WorkflowExecutionStatus
	memo      map[string]any
}

func (r *fakeRun) GetID() string    { return r.id }
func (r *fakeRun) GetRunID() string { return r.runID }

func newFakeTemporal() *fakeTemporal { return &fakeTemporal{runs: map[string]*fakeRun{}} }

// run records a running workflow of id, as if another process had started it.
func (f *fakeTemporal) run(id string, memo map[string]any) *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &fakeRun{id: id, runID: fmt.Sprintf("run-%d", len(f.runs)+len(f.starts)+1), status: enums.WORKFLOW_EXECUTION_STATUS_RUNNING, memo: memo}
	f.runs[id] = r
	return r
}

func (f *fakeTemporal) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	if f.startErr != nil {
		if err := f.startErr(opts.ID); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.starts = append(f.starts, fakeStart{opts: opts, args: args})
	existing := f.runs[opts.ID]
	f.mu.Unlock()
	if existing != nil && existing.status == enums.WORKFLOW_EXECUTION_STATUS_RUNNING &&
		opts.WorkflowIDConflictPolicy == enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		return existing, nil
	}
	return f.run(opts.ID, opts.Memo), nil
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, id, _, name string, arg any) error {
	if f.signalErr != nil {
		if err := f.signalErr(id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.runs[id]; r == nil || r.status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	f.signals = append(f.signals, fakeSignal{id: id, name: name, arg: arg})
	return nil
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if f.describe != nil {
		return nil, f.describe
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[id]
	if r == nil || (runID != "" && r.runID != runID) {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range r.memo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[k] = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: r.runID},
		Status:    r.status,
		Memo:      &commonpb.Memo{Fields: fields},
	}}, nil
}

func (f *fakeTemporal) startsOf(id string) []fakeStart {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeStart
	for _, s := range f.starts {
		if s.opts.ID == id {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeTemporal) signalsTo(id string) []fakeSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeSignal
	for _, s := range f.signals {
		if s.id == id {
			out = append(out, s)
		}
	}
	return out
}

// fixture is a migrated SQLite database with one account and its webhook, and a Dispatcher on a
// fakeTemporal.
type fixture struct {
	db   *model.DB
	hook *model.Webhook
	tc   *fakeTemporal
	d    *dispatch.Dispatcher
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := dbtest.SQLite(t)
	_, acc, err := model.CreateAPIKey(t.Context(), db, "retry@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, tc: newFakeTemporal()}
	f.hook = f.webhook(t, acc.ID)
	f.d = &dispatch.Dispatcher{Client: f.tc, TaskQueue: "q", Schedule: []time.Duration{time.Minute}, RetryWindow: time.Hour, AttemptTimeout: time.Second}
	return f
}

// webhook adds a webhook of variant A for campaign.created to the account.
func (f *fixture) webhook(t *testing.T, accountID int64) *model.Webhook {
	t.Helper()
	now := model.Now()
	w := &model.Webhook{AccountID: accountID, Variant: model.VariantA, URL: "https://hooks.example.com/in", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: "sealed", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(t.Context(), f.db, w, 1000); err != nil {
		t.Fatal(err)
	}
	return w
}

// delivery stores an event for the fixture's webhook alone and gives its delivery state and
// attempts.
func (f *fixture) delivery(t *testing.T, state string, attempts int) model.DeliveryRef {
	t.Helper()
	res, err := model.InsertEvent(t.Context(), f.db, model.NewEvent{AccountID: f.hook.AccountID, Variant: model.VariantA,
		EventType: "campaign.created", Data: `{}`, OnlyWebhook: f.hook.ID})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Deliveries[0].ID
	if _, err := f.db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", state).Set("attempts = ?", attempts).
		Where("id = ?", id).Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	ref, err := model.WebhookDeliveryRef(t.Context(), f.db, f.hook.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (f *fixture) load(t *testing.T, id int64) model.Delivery {
	t.Helper()
	var d model.Delivery
	if err := f.db.NewSelect().Model(&d).Where("id = ?", id).Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) disable(t *testing.T) {
	t.Helper()
	if _, _, err := model.DisableWebhook(t.Context(), f.db, model.WebhookScope{AccountID: f.hook.AccountID, Variant: f.hook.Variant}, f.hook.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) disabled(t *testing.T) bool {
	t.Helper()
	w, err := model.FindWebhook(t.Context(), f.db, f.hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	return w.Disabled()
}

// claim sets a delivery's claim as a manual retry's would be, at the given time.
func (f *fixture) claim(t *testing.T, id int64, state string, at time.Time) {
	t.Helper()
	if _, err := f.db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", state).Set("claimed_at = ?", at).
		Where("id = ?", id).Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
}
