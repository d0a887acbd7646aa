// Package dispatch is the client side of webhookd's Temporal workflows: it starts delivery
// workflows after an event commits, signals and reruns them for a manual retry, resend or recovery,
// cancels them when their webhook goes, and runs the activities through which workflows start
// other workflows (a fan-out, a batch retry, a scheduled publication's event). The API, the
// portal, the worker's sweeper and the operator commands all go through it, so that each does
// what the others do. Workflow code itself lives in package workflows, which imports none of this.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Dispatcher starts and retries delivery workflows. The API starts them right after an event
// commits; the worker's sweeper starts any that a crash left behind. Starting twice is harmless:
// the workflow id of an event x webhook pair is rejected the second time.
type Dispatcher struct {
	Client client.Client
	// TaskQueue takes the workflows and their first attempts; the later attempts go to
	// workflows.RetryTaskQueue(TaskQueue), which the worker polls beside it.
	TaskQueue string
	Schedule  []time.Duration
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
	// Starts counts the delivery workflows started, by who started them (StartedBy); nil counts
	// nothing. NewStartsMetric registers it.
	Starts *prometheus.CounterVec
	// Marks, when set, records a request's starts (StartEvent) off the request's path, many requests'
	// per write, in its own database (StartEvent's db is then not used for them); nil records them
	// in db before StartEvent returns. Fan-outs and sweeps always record their own.
	Marks *Marks

	// shares bounds each account's starts in flight (accountStarts).
	shares startShares
}

// StartedBy names who started a delivery's workflow, a label of webhookd_delivery_starts_total.
type StartedBy string

const (
	// StartedByRequest: the API request that stored the event, right after its commit.
	StartedByRequest StartedBy = "request"
	// StartedByActivity: the workflow that emitted the event (a website's scheduled publication).
	StartedByActivity StartedBy = "activity"
	// StartedByFanOut: an event's FanOutWorkflow, which the request started (StartEvent).
	StartedByFanOut StartedBy = "fanout"
	// StartedBySweeper: the worker's sweeper, for deliveries whose start was left to it (Temporal
	// was away, or the request's dispatch bound passed). A steady rise means starts are failing.
	StartedBySweeper StartedBy = "sweeper"
	// StartedByRepair: the worker's sweeper, handing a delivery to its workflow (a signal, or a
	// new run) because a manual retry claimed it and its process died before it did (RepairClaims).
	StartedByRepair StartedBy = "repair"
	// StartedByLane: an ordered webhook's delivery, by the one before it in its lane when that one
	// was done (docs/ordering.md).
	StartedByLane StartedBy = "lane"
)

// NewStartsMetric registers webhookd_delivery_starts_total with reg, its series at 0.
func NewStartsMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_delivery_starts_total",
		Help: "Delivery workflows started, by who started them: request, fanout (a workflow the request started), activity or sweeper; repair counts the deliveries a crashed manual retry had claimed, handed to their workflows by the sweeper; lane, an ordered webhook's deliveries started by the one before them.",
	}, []string{"by"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register starts metric: %w", err)
	}
	for _, by := range []StartedBy{StartedByRequest, StartedByFanOut, StartedByActivity, StartedBySweeper, StartedByRepair, StartedByLane} {
		c.WithLabelValues(string(by))
	}
	return c, nil
}

// NewFilterSkipsMetric registers webhookd_filter_skips_total with reg, a series at 0 per variant:
// the webhooks an accepted event did not reach because their payload filters refused it.
func NewFilterSkipsMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_filter_skips_total",
		Help: "Webhooks subscribed to an accepted event's type that got no delivery of it because their payload filter refused it, by variant.",
	}, []string{"variant"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register filter skips metric: %w", err)
	}
	for _, v := range model.Variants {
		c.WithLabelValues(string(v))
	}
	return c, nil
}

// NewFilterOverrunsMetric registers webhookd_filter_overruns_total with reg, a series at 0 per
// variant: the webhooks an accepted event reached unjudged because their payload filter ran out of
// its budget (docs/filters.md, "What a filter may cost").
func NewFilterOverrunsMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_filter_overruns_total",
		Help: "Webhooks an accepted event reached unjudged because their payload filter ran out of its budget of steps, by variant.",
	}, []string{"variant"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register filter overruns metric: %w", err)
	}
	for _, v := range model.Variants {
		c.WithLabelValues(string(v))
	}
	return c, nil
}

// CountFilterSkips adds the webhooks that the filters of each newly accepted event in results
// skipped to skips (nil: nothing is counted). A replayed event was counted when it was accepted.
func CountFilterSkips(skips *prometheus.CounterVec, results []*model.PublishResult) {
	if skips == nil {
		return
	}
	for v, n := range model.Filtered(results) {
		skips.WithLabelValues(string(v)).Add(float64(n))
	}
}

// startConcurrency bounds the workflow starts one call has in flight. A fan-out to many webhooks,
// or a sweep of the outbox, starts them this many at a time rather than one round trip after
// another, and one call cannot flood the frontend.
const startConcurrency = 16

// FanOutThreshold is the number of deliveries above which an event's delivery workflows are
// started by a FanOutWorkflow rather than by the request that stored it: the request starts one
// workflow and answers, however many webhooks the event reaches. At or below it the request starts
// them itself, startConcurrency at a time, in one round trip's time.
const FanOutThreshold = startConcurrency

// StartEvent starts the deliveries of one event that a request just stored. Up to
// FanOutThreshold it starts their workflows itself; beyond, it starts the event's FanOutWorkflow,
// which starts them, and records them dispatched, since that workflow now answers for them. Either
// way the request waits for a bounded number of round trips, however many webhooks the event
// reaches. What it could not start stays in the outbox for the sweeper.
func (d *Dispatcher) StartEvent(ctx context.Context, db bun.IDB, refs []model.DeliveryRef) error {
	if len(refs) <= FanOutThreshold {
		if d.Marks == nil {
			return d.Start(ctx, db, refs, StartedByRequest)
		}
		started, err := d.start(ctx, refs, StartedByRequest)
		d.Marks.Add(started)
		return err
	}
	if err := d.startFanOut(ctx, refs[0].EventID, refs[0].AccountID); err != nil {
		return err
	}
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.DeliveryID
	}
	return model.MarkDispatched(context.WithoutCancel(ctx), db, ids)
}

// Start starts the delivery workflows of refs, counted under by, and records which exist now
// (started now or before). What it could not start stays in the outbox for the sweeper.
func (d *Dispatcher) Start(ctx context.Context, db bun.IDB, refs []model.DeliveryRef, by StartedBy) error {
	started, err := d.startTurns(ctx, db, refs, by)
	if merr := model.MarkDispatched(context.WithoutCancel(ctx), db, started); merr != nil {
		return merr
	}
	return err
}

// start starts one workflow per delivery, startConcurrency at a time, counts those it started
// under by, and returns the ids of those that now exist. At the first error it starts no more,
// waits for the starts in flight, and returns what it had started with that error.
//
// Only a request's own few starts are eager (EagerStart): an eagerly started workflow's first task
// goes straight to this process's worker, past matching and so past fairness. A fan-out's or the
// sweeper's hundreds would queue in the worker ahead of other accounts' first tasks; measured, a
// healthy account's event waited 7-10 s behind another account's fan-out to a hanging receiver,
// and 1-3 s without (docs/performance-history.md).
func (d *Dispatcher) start(ctx context.Context, refs []model.DeliveryRef, by StartedBy) ([]int64, error) {
	eager := d.EagerStart && by == StartedByRequest
	if len(refs) == 1 {
		// Most events reach one webhook: start it on the caller's goroutine, whose stack has
		// grown already, rather than on a fresh one that grows its stack in the SDK's payload
		// visitor on every start.
		return d.startSingle(ctx, refs[0], eager, by)
	}
	refs = interleave(refs)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(startConcurrency)
	ok := make([]bool, len(refs)) // each start writes its own element: no lock
	var created atomic.Int64
	for i, r := range refs {
		if gctx.Err() != nil {
			break // a start failed, or the caller gave up
		}
		g.Go(func() error {
			isNew, err := d.startOne(gctx, r, eager)
			if err != nil {
				return err
			}
			ok[i] = true
			if isNew {
				created.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	started := make([]int64, 0, len(refs))
	for i, r := range refs {
		if ok[i] {
			started = append(started, r.DeliveryID)
		}
	}
	if err == nil && len(started) < len(refs) {
		// The caller's deadline passed between two starts.
		err = fmt.Errorf("start deliveries: %d of %d started: %w", len(started), len(refs), context.Cause(ctx))
	}
	if d.Starts != nil {
		// Only the workflows this call created: one that already existed (its mark was lost, say)
		// was counted by whoever started it.
		d.Starts.WithLabelValues(string(by)).Add(float64(created.Load()))
	}
	return started, err
}

// startSingle is start for one delivery.
func (d *Dispatcher) startSingle(ctx context.Context, r model.DeliveryRef, eager bool, by StartedBy) ([]int64, error) {
	isNew, err := d.startOne(ctx, r, eager)
	if err != nil {
		return nil, err
	}
	if isNew && d.Starts != nil {
		d.Starts.WithLabelValues(string(by)).Inc()
	}
	return []int64{r.DeliveryID}, nil
}

// startOne starts the workflow of one delivery and reports whether it created it; one that
// already exists counts as started. An ordered webhook's delivery that intake found behind others
// in its lane (LaneQueued) is not started, and counts as started: the one before it starts it.
func (d *Dispatcher) startOne(ctx context.Context, r model.DeliveryRef, eager bool) (bool, error) {
	if r.LaneQueued {
		return false, nil // its lane is under way: the delivery before it starts it (startTurns)
	}
	release, err := d.shares.take(ctx, r.AccountID)
	if err != nil {
		return false, fmt.Errorf("start %s: waiting for the account's share of starts: %w", workflows.DeliveryWorkflowID(r.EventID, r.WebhookID), err)
	}
	defer release()
	opts := d.startOptions(r)
	opts.WorkflowIDReusePolicy = enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE // one workflow per pair, ever
	opts.EnableEagerStart = eager
	_, err = d.Client.ExecuteWorkflow(ctx, opts, workflows.DeliveryWorkflow, d.input(r, 0))
	switch {
	case isAlreadyStarted(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("start %s: %w", opts.ID, err)
	}
	return true, nil
}

func (d *Dispatcher) startOptions(r model.DeliveryRef) client.StartWorkflowOptions {
	details := fmt.Sprintf("delivery %d of event %d to webhook %d (variant %s)", r.DeliveryID, r.EventID, r.WebhookID, r.Variant)
	if r.LaneID != 0 {
		details += fmt.Sprintf(", number %d in ordered lane %d", r.LaneSeq, r.LaneID)
	}
	return client.StartWorkflowOptions{
		ID:        workflows.DeliveryWorkflowID(r.EventID, r.WebhookID),
		TaskQueue: d.TaskQueue,
		// Matching dispatches the tasks of a queue round-robin across fairness keys (where the
		// server has fairness enabled), so one account's backlog cannot queue ahead of
		// another's. The workflow's activities inherit the key.
		Priority: temporal.Priority{FairnessKey: FairnessKey(r.AccountID)},
		// What the Web UI lists: the event type and the receiver's host, never the whole URL, whose
		// path or query may hold a credential.
		StaticSummary: DeliverySummary(r),
		StaticDetails: details,
		// No search attributes: the workflow sets them when the delivery first needs an operator's
		// eye (retrying, exhausted, canceled); one delivered at once is never indexed, which saves the
		// Temporal server a visibility write per delivery (workflows.deliveryRun.setState).
	}
}

// searchableStartOptions are the start options of a manual retry's new run: with its search
// attributes from the start, as it follows a run an operator may have searched for.
func (d *Dispatcher) searchableStartOptions(r model.DeliveryRef) client.StartWorkflowOptions {
	opts := d.startOptions(r)
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		workflows.DeliverySearchAttributes(r.WebhookID, r.EventType, r.Variant, model.DeliveryDelivering)...)
	return opts
}

func (d *Dispatcher) input(r model.DeliveryRef, priorAttempts int) workflows.DeliveryInput {
	in := workflows.DeliveryInput{
		DeliveryID: r.DeliveryID, EventID: r.EventID, WebhookID: r.WebhookID, Variant: r.Variant, EventType: r.EventType,
		Schedule: d.Schedule, RetryWindow: d.RetryWindow, AttemptTimeout: d.AttemptTimeout,
		RetryTaskQueue: workflows.RetryTaskQueue(d.TaskQueue), Jitter: d.Jitter, PriorAttempts: priorAttempts,
	}
	if r.LaneID != 0 {
		// An ordered webhook's delivery: an exhausted one waits for its owner as long as it takes,
		// since its lane waits behind it, and once done it starts the next (docs/ordering.md).
		in.Lane, in.LaneSeq, in.RetryWindow = r.LaneID, r.LaneSeq, workflows.LaneRetryWindow
	}
	return in
}

// startTurns is start for deliveries read from the database (a fan-out's, the sweeper's, a workflow's
// event's), some perhaps of ordered webhooks: those are started only at their lane's head, the
// first of the lane not done, which is started in their place, once per lane (the one before a
// delivery starts it, docs/ordering.md). The deliveries a head stands for count as started with it.
func (d *Dispatcher) startTurns(ctx context.Context, db bun.IDB, refs []model.DeliveryRef, by StartedBy) ([]int64, error) {
	var lanes []int64
	standIn := map[int64][]int64{} // lane -> the deliveries of refs its head stands for
	plain := make([]model.DeliveryRef, 0, len(refs))
	for _, r := range refs {
		if r.LaneID == 0 {
			plain = append(plain, r)
			continue
		}
		if _, seen := standIn[r.LaneID]; !seen {
			lanes = append(lanes, r.LaneID)
		}
		standIn[r.LaneID] = append(standIn[r.LaneID], r.DeliveryID)
	}
	if len(lanes) == 0 {
		return d.start(ctx, refs, by)
	}
	heads, err := model.LaneHeadRefs(ctx, db, lanes)
	if err != nil {
		return nil, err
	}
	started, err := d.start(ctx, append(plain, heads...), by)
	headed := map[int64]bool{}
	for _, h := range heads {
		headed[h.LaneID] = slices.Contains(started, h.DeliveryID)
	}
	for _, lane := range lanes {
		if ok, hasHead := headed[lane]; ok || !hasHead {
			// Started with their head; or their lane has none left (they are done).
			started = append(started, standIn[lane]...)
		}
	}
	return started, err
}

// StartLaneHead starts the head of lane, if it has one and it does not run (startTurns): after a
// skip of a head whose workflow was not running, or for a delivery the lane has not reached.
func (d *Dispatcher) StartLaneHead(ctx context.Context, db bun.IDB, lane int64, by StartedBy) error {
	heads, err := model.LaneHeadRefs(ctx, db, []int64{lane})
	if err != nil || len(heads) == 0 {
		return err
	}
	_, err = d.start(ctx, heads, by)
	return err
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

// startFanOut starts the FanOutWorkflow of an event; one that already exists counts as started.
func (d *Dispatcher) startFanOut(ctx context.Context, eventID, accountID int64) error {
	_, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.FanOutWorkflowID(eventID),
		TaskQueue:                d.TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		Priority:                 temporal.Priority{FairnessKey: FairnessKey(accountID)},
		EnableEagerStart:         d.EagerStart,
	}, workflows.FanOutWorkflow, workflows.FanOutInput{EventID: eventID})
	if err != nil && !isAlreadyStarted(err) {
		return fmt.Errorf("start %s: %w", workflows.FanOutWorkflowID(eventID), err)
	}
	return nil
}

// Cancel cancels the delivery workflows of refs (their webhook was deleted) and returns the
// delivery ids it reached. A workflow that has already ended is skipped. Each canceled workflow
// marks its delivery canceled and ends as canceled.
func (d *Dispatcher) Cancel(ctx context.Context, refs []model.DeliveryRef) ([]int64, error) {
	return eachRunning(refs, "cancel", func(id string) error { return d.Client.CancelWorkflow(ctx, id, "") })
}

// eachRunning calls do with the workflow id of each delivery of refs and returns the delivery ids
// it reached: a workflow that has ended (NotFound) is skipped, and the first other error stops it,
// named with verb.
func eachRunning(refs []model.DeliveryRef, verb string, do func(workflowID string) error) ([]int64, error) {
	reached := make([]int64, 0, len(refs))
	for _, r := range refs {
		id := workflows.DeliveryWorkflowID(r.EventID, r.WebhookID)
		err := do(id)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			return reached, fmt.Errorf("%s %s: %w", verb, id, err)
		}
		reached = append(reached, r.DeliveryID)
	}
	return reached, nil
}

// Retime tells the delivery workflows of a webhook whose rate limit or concurrency changed, those
// whose schedule is under way, that an attempt held back for its turn comes back at once for a turn
// under the new limits (workflows.SignalLimits); it returns how many it reached. A workflow that
// has ended is skipped, and one whose attempt is not held ignores the signal. A signal not sent
// only leaves a held attempt to come back at the turn it was given, to be re-timed then.
func (d *Dispatcher) Retime(ctx context.Context, db bun.IDB, webhookID int64) (int, error) {
	refs, err := deliveryRefs(ctx, db, model.DeliveryQuery{WebhookID: webhookID, States: model.UnderwayStates})
	if err != nil {
		return 0, err
	}
	told, err := eachRunning(refs, "signal", func(id string) error {
		return d.Client.SignalWorkflow(ctx, id, "", workflows.SignalLimits, nil)
	})
	return len(told), err
}

// SchedulePublish starts (or replaces) the scheduled publication of a website.
func (d *Dispatcher) SchedulePublish(ctx context.Context, websiteID int64, at time.Time) error {
	_, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.WebsitePublishWorkflowID(websiteID),
		TaskQueue:                d.TaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.WebsitePublishWorkflow, workflows.WebsitePublishInput{WebsiteID: websiteID, ScheduledAt: at})
	if err != nil {
		return fmt.Errorf("schedule publication of website %d: %w", websiteID, err)
	}
	return nil
}

// CancelPublish cancels a website's scheduled publication, if there is one.
func (d *Dispatcher) CancelPublish(ctx context.Context, websiteID int64) error {
	err := d.Client.CancelWorkflow(ctx, workflows.WebsitePublishWorkflowID(websiteID), "")
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

// EndWebhookDeliveries ends the deliveries of a webhook just deleted, for the API and the portal:
// the unfinished ones are marked canceled, then their workflows are canceled (within timeout), so
// none waits out its retry window. d nil (no Temporal client) skips the workflows. The webhook is
// gone whatever this returns: what it does not reach ends by itself, as any later attempt finds the
// webhook deleted and cancels its delivery. The error is the caller's to log.
func EndWebhookDeliveries(ctx context.Context, db bun.IDB, d *Dispatcher, webhookID int64, timeout time.Duration) error {
	refs, err := deliveryRefs(ctx, db, model.DeliveryQuery{WebhookID: webhookID, States: model.OpenStates})
	if err == nil {
		err = model.CancelOpenDeliveries(ctx, db, webhookID)
	}
	if err != nil {
		return fmt.Errorf("cancel deliveries of deleted webhook %d: %w", webhookID, err)
	}
	if d == nil || len(refs) == 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if canceled, err := d.Cancel(tctx, refs); err != nil {
		return fmt.Errorf("cancel delivery workflows of deleted webhook %d (%d of %d canceled): %w", webhookID, len(canceled), len(refs), err)
	}
	return nil
}

// deliveryRefs reads the references of the deliveries q selects (model.ReadDeliveries, the one
// read of deliveries): what starting or signaling their workflows needs.
func deliveryRefs(ctx context.Context, db bun.IDB, q model.DeliveryQuery) ([]model.DeliveryRef, error) {
	page, err := model.ReadDeliveries(ctx, db, q)
	if err != nil {
		return nil, err
	}
	return page.Refs(), nil
}

// Skip cancels the workflow of an ordered lane's head (the delivery of eventID to webhookID) that
// its owner skips (webhooks.Service.SkipLane): the workflow marks its delivery canceled and ends,
// and its lane goes on. One that is not running is skipped by its row alone.
func (d *Dispatcher) Skip(ctx context.Context, eventID, webhookID int64) error {
	id := workflows.DeliveryWorkflowID(eventID, webhookID)
	err := d.Client.CancelWorkflow(ctx, id, "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("%w: skip %s: %w", ErrTemporal, id, err)
	}
	return nil
}
