package workflows

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/webhookd/webhookd/model"
)

// Starter starts delivery workflows. The API starts them right after an event commits; the
// worker's sweeper starts any that a crash left behind. Starting twice is harmless: the workflow id
// of an event x webhook pair is rejected the second time.
type Starter struct {
	Client    client.Client
	TaskQueue string
	// RetryTaskQueue takes the attempts after the first (RetryTaskQueue(TaskQueue) in production);
	// required: a delivery workflow started without one fails (workflows.ErrTypeInvalidInput).
	RetryTaskQueue string
	Schedule       []time.Duration
	// Jitter is the largest fraction added to each retry delay.
	Jitter         float64
	RetryWindow    time.Duration
	AttemptTimeout time.Duration
	// EagerStart asks the server to hand each new workflow's first task straight back to a worker
	// of this process (Temporal's eager workflow start), saving a poll round trip. Only a process
	// whose worker polls TaskQueue through Client (role all) gains from it; elsewhere the server
	// dispatches as usual. It applies to the starts a request makes itself (its deliveries, up to
	// FanOutThreshold, or its FanOutWorkflow), never to a fan-out's or the sweeper's.
	EagerStart bool
	// Starts counts the delivery workflows Dispatch started, by who started them (StartedBy);
	// nil counts nothing. NewStartsMetric registers it.
	Starts *prometheus.CounterVec
}

// StartedBy names who started a delivery's workflow, a label of webhookd_delivery_starts_total.
type StartedBy string

const (
	// StartedByRequest: the API request that stored the event, right after its commit.
	StartedByRequest StartedBy = "request"
	// StartedByActivity: the activity that emitted the event (a website's scheduled publication).
	StartedByActivity StartedBy = "activity"
	// StartedByFanOut: an event's FanOutWorkflow, which the request started (DispatchEvent).
	StartedByFanOut StartedBy = "fanout"
	// StartedBySweeper: the worker's sweeper, for deliveries whose start was left to it (Temporal
	// was away, or the request's dispatch bound passed). A steady rise means starts are failing.
	StartedBySweeper StartedBy = "sweeper"
	// StartedByRepair: the worker's sweeper, handing a delivery to its workflow (a signal, or a
	// new run) because a manual retry claimed it and its process died before it did (RepairClaims).
	StartedByRepair StartedBy = "repair"
)

// NewStartsMetric registers webhookd_delivery_starts_total with reg, its series at 0.
func NewStartsMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_delivery_starts_total",
		Help: "Delivery workflows started, by who started them: request, fanout (a workflow the request started), activity or sweeper; repair counts the deliveries a crashed manual retry had claimed, handed to their workflows by the sweeper.",
	}, []string{"by"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register starts metric: %w", err)
	}
	for _, by := range []StartedBy{StartedByRequest, StartedByFanOut, StartedByActivity, StartedBySweeper, StartedByRepair} {
		c.WithLabelValues(string(by))
	}
	return c, nil
}

// startConcurrency bounds the workflow starts one Start call has in flight. A fan-out to many
// webhooks, or a sweep of the outbox, starts them this many at a time rather than one round trip
// after another, and one call cannot flood the frontend.
const startConcurrency = 16

// Start starts one workflow per delivery, startConcurrency at a time, and returns the ids of those
// that now exist (started now or before). At the first error it starts no more, waits for the
// starts in flight, and returns what it had started with that error. It never starts eagerly: see
// startCounted.
func (s *Starter) Start(ctx context.Context, refs []model.DeliveryRef) ([]int64, error) {
	return s.start(ctx, refs, false)
}

func (s *Starter) start(ctx context.Context, refs []model.DeliveryRef, eager bool) ([]int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		started = make([]int64, 0, len(refs))
		first   error
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, startConcurrency)
	for _, r := range refs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			err := s.startOne(ctx, r, eager)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
					cancel()
				}
				return
			}
			started = append(started, r.DeliveryID)
		})
	}
	wg.Wait()
	if first == nil && len(started) < len(refs) {
		// The caller's deadline passed between two starts.
		first = fmt.Errorf("start deliveries: %d of %d started: %w", len(started), len(refs), context.Cause(ctx))
	}
	return started, first
}

// startOne starts the workflow of one delivery; one that already exists counts as started.
func (s *Starter) startOne(ctx context.Context, r model.DeliveryRef, eager bool) error {
	opts := s.startOptions(r)
	opts.WorkflowIDReusePolicy = enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE // one workflow per pair, ever
	opts.EnableEagerStart = eager
	_, err := s.Client.ExecuteWorkflow(ctx, opts, DeliveryWorkflow, s.input(r, 0))
	if err != nil && !isAlreadyStarted(err) {
		return fmt.Errorf("start %s: %w", opts.ID, err)
	}
	return nil
}

func (s *Starter) startOptions(r model.DeliveryRef) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:        DeliveryWorkflowID(r.EventID, r.WebhookID),
		TaskQueue: s.TaskQueue,
		// Matching dispatches the tasks of a queue round-robin across fairness keys (where the
		// server has fairness enabled), so one account's backlog cannot queue ahead of
		// another's. The workflow's activities inherit the key.
		Priority: temporal.Priority{FairnessKey: FairnessKey(r.AccountID)},
		// What the Web UI lists: the event type and the receiver's host, never the whole URL, whose
		// path or query may hold a credential.
		StaticSummary: DeliverySummary(r),
		StaticDetails: fmt.Sprintf("delivery %d of event %d to webhook %d (variant %s)", r.DeliveryID, r.EventID, r.WebhookID, r.Variant),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			AttrWebhookID.ValueSet(r.WebhookID),
			AttrEventType.ValueSet(r.EventType),
			AttrVariant.ValueSet(string(r.Variant)),
			AttrDeliveryState.ValueSet(model.DeliveryDelivering),
		),
	}
}

func (s *Starter) input(r model.DeliveryRef, priorAttempts int) DeliveryInput {
	return DeliveryInput{
		DeliveryID: r.DeliveryID, EventID: r.EventID, WebhookID: r.WebhookID, Variant: r.Variant, EventType: r.EventType,
		Schedule: s.Schedule, RetryWindow: s.RetryWindow, AttemptTimeout: s.AttemptTimeout,
		RetryTaskQueue: s.RetryTaskQueue, Jitter: s.Jitter, PriorAttempts: priorAttempts,
	}
}

// DeliverySummary is a delivery workflow's one line in the Web UI: "lead.captured to
// hooks.example.com".
func DeliverySummary(r model.DeliveryRef) string {
	u, err := url.Parse(r.WebhookURL)
	if err != nil || u.Host == "" {
		return r.EventType
	}
	return fmt.Sprintf("%s to %s", r.EventType, u.Host)
}

// FairnessKey is the Temporal fairness key of an account's deliveries.
func FairnessKey(accountID int64) string { return fmt.Sprintf("account:%d", accountID) }

// Retry retries each delivery of refs and returns the ids of those it retried. A workflow still
// running (in its retry window) gets the retry signal. One that has ended (its retry window
// closed, or it failed) gets a new run under the same workflow id, with today's schedule, counting
// its attempts on from the reference's Attempts so the attempt log continues. It stops at the
// first error, returning what it had retried.
func (s *Starter) Retry(ctx context.Context, refs []model.DeliveryRef) ([]int64, error) {
	retried := make([]int64, 0, len(refs))
	for _, r := range refs {
		if err := s.retryOne(ctx, r); err != nil {
			return retried, err
		}
		retried = append(retried, r.DeliveryID)
	}
	return retried, nil
}

// retryOne signals the workflow of one delivery, or runs it again if it has ended.
func (s *Starter) retryOne(ctx context.Context, r model.DeliveryRef) error {
	id := DeliveryWorkflowID(r.EventID, r.WebhookID)
	err := s.Client.SignalWorkflow(ctx, id, "", SignalRetry, retrySignal(ctx))
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// Not SignalWithStart: a new run must not find a retry signal waiting, which would cut
		// short its first scheduled wait.
		opts := s.startOptions(r)
		opts.WorkflowIDReusePolicy = enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
		_, err = s.Client.ExecuteWorkflow(ctx, opts, DeliveryWorkflow, s.input(r, r.Attempts))
		if isAlreadyStarted(err) {
			err = nil // a concurrent retry started it first
		}
	}
	if err != nil {
		return fmt.Errorf("retry %s: %w", id, err)
	}
	return nil
}

// RepairClaims hands to their workflows the deliveries that a manual retry claimed before
// olderThan and never released: its process died between the claim and the signal or start (or
// right after it, before the release). Each is handed over as a resend is, the running workflow
// signaled or a new run started under the same id with its attempts numbered on, and its claim is
// cleared. A claim whose signal had in fact landed gets a second one: at worst one more POST, with
// the same webhook-id (at least once, never lost). A delivery whose state shows that its
// workflow has run since (delivered, exhausted or canceled) only loses the claim. It returns how
// many it handed over, counted under StartedByRepair.
func (s *Starter) RepairClaims(ctx context.Context, db bun.IDB, olderThan time.Time) (int, error) {
	total := 0
	for {
		refs, err := model.StaleClaims(ctx, db, olderThan, 200)
		if err != nil || len(refs) == 0 {
			return total, err
		}
		handed := make([]int64, 0, len(refs))
		for _, r := range refs {
			var again bool
			if again, err = s.repairClaim(ctx, db, r); err != nil {
				break
			}
			if again {
				handed = append(handed, r.DeliveryID)
			}
		}
		total += len(handed)
		if s.Starts != nil {
			s.Starts.WithLabelValues(string(StartedByRepair)).Add(float64(len(handed)))
		}
		if merr := model.MarkDispatched(context.WithoutCancel(ctx), db, handed); merr != nil {
			err = errors.Join(err, merr)
		}
		if err != nil {
			return total, err
		}
	}
}

// repairClaim hands one stale claim's delivery to its workflow, unless its state shows the
// workflow ran since, and clears the claim. It reports whether it handed the delivery over.
func (s *Starter) repairClaim(ctx context.Context, db bun.IDB, r model.ClaimedRef) (bool, error) {
	again := true
	switch r.State {
	case model.DeliveryDelivered, model.DeliveryExhausted, model.DeliveryCanceled:
		again = false
	}
	if again {
		if err := s.retryOne(ctx, r.DeliveryRef); err != nil {
			return false, err
		}
	}
	return again, model.ReleaseClaim(ctx, db, r.DeliveryID, r.ClaimedAt)
}

// Cancel cancels the delivery workflows of refs (their webhook was deleted) and returns the
// delivery ids it reached. A workflow that has already ended is skipped. Each canceled workflow
// marks its delivery canceled and ends as canceled.
func Cancel(ctx context.Context, c client.Client, refs []model.DeliveryRef) ([]int64, error) {
	canceled := make([]int64, 0, len(refs))
	for _, r := range refs {
		id := DeliveryWorkflowID(r.EventID, r.WebhookID)
		err := c.CancelWorkflow(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			return canceled, fmt.Errorf("cancel %s: %w", id, err)
		}
		canceled = append(canceled, r.DeliveryID)
	}
	return canceled, nil
}

// SchedulePublish starts (or replaces) the scheduled publication of a website.
func (s *Starter) SchedulePublish(ctx context.Context, websiteID int64, at time.Time) error {
	_, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       WebsitePublishWorkflowID(websiteID),
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, WebsitePublishWorkflow, WebsitePublishInput{WebsiteID: websiteID, ScheduledAt: at})
	if err != nil {
		return fmt.Errorf("schedule publication of website %d: %w", websiteID, err)
	}
	return nil
}

// CancelPublish cancels a website's scheduled publication, if there is one.
func (s *Starter) CancelPublish(ctx context.Context, websiteID int64) error {
	err := s.Client.CancelWorkflow(ctx, WebsitePublishWorkflowID(websiteID), "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("cancel publication of website %d: %w", websiteID, err)
	}
	return nil
}

func isAlreadyStarted(err error) bool {
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &already)
}

// DispatchEvent starts the deliveries of one event that a request just stored. Up to
// FanOutThreshold it starts their workflows itself; beyond, it starts the event's FanOutWorkflow,
// which starts them, and records them dispatched, since that workflow now answers for them. Either
// way the request waits for a bounded number of round trips, however many webhooks the event
// reaches. What it could not start stays in the outbox for the sweeper.
func (s *Starter) DispatchEvent(ctx context.Context, db bun.IDB, refs []model.DeliveryRef) error {
	if len(refs) <= FanOutThreshold {
		return s.Dispatch(ctx, db, refs, StartedByRequest)
	}
	if err := s.startFanOut(ctx, refs[0].EventID, refs[0].AccountID); err != nil {
		return err
	}
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.DeliveryID
	}
	return model.MarkDispatched(context.WithoutCancel(ctx), db, ids)
}

// Dispatch starts the delivery workflows of refs and records which exist now. What it could not
// start stays in the outbox for the sweeper.
func (s *Starter) Dispatch(ctx context.Context, db bun.IDB, refs []model.DeliveryRef, by StartedBy) error {
	started, err := s.startCounted(ctx, refs, by)
	if merr := model.MarkDispatched(context.WithoutCancel(ctx), db, started); merr != nil {
		return merr
	}
	return err
}

// startCounted is Start, counting what it started under by. Only a request's own few starts are
// eager (EagerStart): an eagerly started workflow's first task goes straight to this process's
// worker, past matching and so past fairness. A fan-out's or the sweeper's hundreds would queue in
// the worker ahead of other accounts' first tasks; measured, a healthy account's event waited 7-10 s
// behind another account's fan-out to a hanging receiver, and 1-3 s without (docs/performance.md).
func (s *Starter) startCounted(ctx context.Context, refs []model.DeliveryRef, by StartedBy) ([]int64, error) {
	started, err := s.start(ctx, refs, s.EagerStart && by == StartedByRequest)
	if s.Starts != nil {
		s.Starts.WithLabelValues(string(by)).Add(float64(len(started)))
	}
	return started, err
}
