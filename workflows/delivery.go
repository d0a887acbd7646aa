// Package workflows holds webhookd's Temporal workflows. They are deterministic: time comes from
// workflow.Now and durable timers, ids from inputs, and every side effect runs in an activity.
package workflows

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
)

// RetryTaskQueue names the task queue of retried attempts next to queue: retries have their own
// worker slots, so a backlog of them never starves the first attempts of fresh events.
func RetryTaskQueue(queue string) string { return queue + "-retry" }

// Names an operator uses from the Temporal Web UI or CLI.
const (
	// SignalRetry runs an exhausted delivery's schedule again from the first attempt.
	SignalRetry = "retry"
	// SignalLimits tells a delivery that its webhook's rate limit or concurrency changed: an
	// attempt held back comes back at once for a turn under them (the API sends it).
	SignalLimits = "limits"
	// QueryState returns a DeliveryState.
	QueryState = "state"
)

// ErrTypeInvalidInput fails a DeliveryWorkflow started with an input it cannot run: no retry
// task queue, or no attempt timeout. Its input is frozen into its history, so no retry of the
// workflow could fix it; the starter's can, and a manual retry then starts a new run.
const ErrTypeInvalidInput = "InvalidDeliveryInput"

// Search attributes of delivery workflows. These are their only definitions: SearchAttributes
// lists them for whatever registers them on a namespace (`webhookd search-attributes`, the tests)
// and for the check at startup (CheckSearchAttributes).
var (
	AttrWebhookID     = temporal.NewSearchAttributeKeyInt64("WebhookId")
	AttrEventType     = temporal.NewSearchAttributeKeyKeyword("EventType")
	AttrVariant       = temporal.NewSearchAttributeKeyKeyword("Variant")
	AttrDeliveryState = temporal.NewSearchAttributeKeyKeyword("DeliveryState")

	SearchAttributes = []temporal.SearchAttributeKey{AttrWebhookID, AttrEventType, AttrVariant, AttrDeliveryState}
)

// DeliveryWorkflowID makes one event x webhook pair one workflow: a second start is rejected.
func DeliveryWorkflowID(eventID, webhookID int64) string {
	return fmt.Sprintf("delivery:%d:%d", eventID, webhookID)
}

// DeliveryInput starts a DeliveryWorkflow. It carries ids only; bodies stay in the database.
type DeliveryInput struct {
	DeliveryID int64
	EventID    int64
	WebhookID  int64
	Variant    model.Variant
	EventType  string
	// Schedule is the delay before each retry; a test event is never retried.
	Schedule []time.Duration
	// RetryWindow is how long an exhausted delivery waits for a retry signal before it ends.
	RetryWindow time.Duration
	// AttemptTimeout bounds one HTTP attempt (the activity's own timeout is a little longer).
	// Required.
	AttemptTimeout time.Duration
	// RetryTaskQueue is where attempts after the first run. Required: the workflow's own queue
	// would put retries back on the first attempts' slots.
	RetryTaskQueue string
	// Jitter is the largest fraction added to each retry delay; zero adds none.
	Jitter float64
	// PriorAttempts is how many attempts earlier runs of this delivery made: a run started by a
	// manual retry after the previous one ended numbers its attempts on from there.
	PriorAttempts int
	// Resend says that the delivery was delivered before this run (a resend): its attempts say so
	// to an ordered webhook's receiver (docs/ordering.md).
	Resend bool
}

// check fails an input the workflow cannot run, naming the missing field.
func (in DeliveryInput) check() error {
	var missing string
	switch {
	case in.RetryTaskQueue == "":
		missing = "RetryTaskQueue"
	case in.AttemptTimeout <= 0:
		missing = "AttemptTimeout"
	default:
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("delivery %d: DeliveryInput.%s is not set", in.DeliveryID, missing),
		ErrTypeInvalidInput, nil)
}

// RetryRequest is the payload of a retry signal that a resend sends: when it was asked for. A signal
// without it (an operator's, from the Web UI or the CLI, or a batch retry's) asks for an attempt
// whenever it comes.
type RetryRequest struct {
	// AskedAt is when the resend's request came in. An attempt that started after it answers it,
	// so its signal, should it come in later still (behind 49 other concurrent resends, say), asks
	// for nothing more.
	AskedAt time.Time
	// UnlessDelivered asks for an attempt only if the delivery has not been delivered: a
	// recovery's, which covers deliveries with an attempt in flight. The attempt that delivers
	// answers it; one that fails leaves it to run the schedule again.
	UnlessDelivered bool
}

// DeliveryState is what the state query returns.
type DeliveryState struct {
	State         string
	Attempts      int
	NextAttemptAt *time.Time
	LastError     string
}

// DeliveryWorkflow delivers one event to one webhook: an attempt, then one more after each delay of
// the schedule, durable across crashes. When the last attempt fails it marks the webhook failing
// (alerting the owner once), then waits for a retry signal, which runs the schedule again.
//
// The first attempt is a local activity; the attempts after it run on the retry task queue
// (deliveryRun.attempt). Each delay gets its jitter, or is longer when the receiver asked with
// Retry-After. An attempt that finds the webhook disabled posts nothing: the delivery is held as
// exhausted and waits for the retry signal like any other.
//
// Canceling the workflow (the API does when the webhook is deleted) marks the delivery canceled,
// sets DeliveryState canceled and ends the workflow as canceled. An internal error no retry can fix
// sets DeliveryState exhausted and fails the workflow; a manual retry from the API starts a new
// run of an ended workflow (DeliveryInput.PriorAttempts carries the attempt count on).
func DeliveryWorkflow(ctx workflow.Context, in DeliveryInput) (DeliveryState, error) {
	r := newDeliveryRun(ctx, in)
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (DeliveryState, error) { return r.st, nil }); err != nil {
		return r.st, err
	}
	if err := in.check(); err != nil {
		return r.st, err
	}
	err := r.deliver()
	if ctx.Err() != nil && temporal.IsCanceledError(err) {
		err = r.endCanceled(err)
	}
	// A limits signal that found no attempt held asked for nothing.
	drain(r.limits)
	return r.st, err
}

// localRetryHorizon bounds the retries of a first attempt run as a local activity (our own
// infrastructure failing): ten years, that is, never in practice, as for a regular activity.
const localRetryHorizon = 10 * 365 * 24 * time.Hour

// deliverOptions are the Deliver activity's options on queue (empty: the workflow's own).
func deliverOptions(attemptTimeout time.Duration, queue string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue: queue,
		// The exchange and its record, after up to one more attempt's time waiting in the worker
		// for its turn at a busy receiver (Deliver takes what this leaves).
		StartToCloseTimeout: activities.AttemptBudget{Timeout: attemptTimeout}.StartToClose(),
		// A receiver's failure is a result, not an error, so only our own infrastructure failures
		// (the database) and a receiver host at its concurrency cap (which names its own next
		// retry time) are retried here, for as long as they last: giving up would lose the
		// delivery. The schedule is the receiver's retry policy.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: activities.PermanentErrorTypes},
	}
}

// localDeliverOptions are the options of the first attempt, a local activity: the same timeout and
// retry policy as deliverOptions. A retry delay longer than the workflow task timeout (a database
// outage, a busy host's appointment) becomes a durable timer in the history, as a regular
// activity's would be. A local activity's retries end at its ScheduleToClose, which defaults to one
// StartToClose: it is set far out, since giving up on an outage would lose the delivery.
func localDeliverOptions(attemptTimeout time.Duration) workflow.LocalActivityOptions {
	opts := deliverOptions(attemptTimeout, "")
	return workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout, ScheduleToCloseTimeout: localRetryHorizon,
		RetryPolicy: opts.RetryPolicy}
}

// dbOptions are the options of the activities that only write to the database.
func dbOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
	}
}

// deliveryRun is one run of a DeliveryWorkflow: its input, the state its query shows, the retry
// signals, and a context for each way an activity runs, built once.
type deliveryRun struct {
	ctx    workflow.Context
	in     DeliveryInput
	st     DeliveryState
	retry  workflow.ReceiveChannel
	limits workflow.ReceiveChannel
	// lastAttempt is when the last attempt started, for the retry signals' AskedAt.
	lastAttempt time.Time
	// searchable: the run carries its search attributes (setState).
	searchable bool
	// resending: the delivery was delivered in this run, and a resend asked for another attempt.
	resending bool

	local    workflow.Context // the first attempt, a local activity
	handBack workflow.Context // a first attempt the local activity handed back, on the workflow's queue
	retried  workflow.Context // every later attempt, on the retry queue
	db       workflow.Context
}

func newDeliveryRun(ctx workflow.Context, in DeliveryInput) *deliveryRun {
	return &deliveryRun{
		ctx: ctx,
		in:  in,
		st:  DeliveryState{State: model.DeliveryDelivering, Attempts: in.PriorAttempts},
		// Read from the started event: the same in every replay.
		searchable: workflow.GetTypedSearchAttributes(ctx).ContainsKey(AttrWebhookID),
		retry:      workflow.GetSignalChannel(ctx, SignalRetry),
		limits:     workflow.GetSignalChannel(ctx, SignalLimits),
		local:      workflow.WithLocalActivityOptions(ctx, localDeliverOptions(in.AttemptTimeout)),
		handBack:   workflow.WithActivityOptions(ctx, deliverOptions(in.AttemptTimeout, "")),
		retried:    workflow.WithActivityOptions(ctx, deliverOptions(in.AttemptTimeout, in.RetryTaskQueue)),
		db:         workflow.WithActivityOptions(ctx, dbOptions()),
	}
}

// The Web UI tells the story at a glance: each attempt is named in its activity's summary, its
// outcome in the summary of what follows it (the wait, or the exhaustion), and the workflow's
// current details say where it stands. None of them carries the URL or anything secret.
func withSummary(ctx workflow.Context, summary string) workflow.Context {
	opts := workflow.GetActivityOptions(ctx)
	opts.Summary = summary
	return workflow.WithActivityOptions(ctx, opts)
}

func withLocalSummary(ctx workflow.Context, summary string) workflow.Context {
	opts := workflow.GetLocalActivityOptions(ctx)
	opts.Summary = summary
	return workflow.WithLocalActivityOptions(ctx, opts)
}

// deliver runs the schedule until the delivery ends: delivered, its webhook gone, or exhausted
// with no retry signal in the retry window. A retry signal runs the schedule again.
func (r *deliveryRun) deliver() error {
	for {
		last, err := r.runSchedule()
		switch {
		case err != nil:
			return err
		case last.WebhookGone:
			return r.setState(model.DeliveryCanceled)
		case last.Delivered:
			workflow.SetCurrentDetails(r.ctx, fmt.Sprintf("**delivered**: attempt %d: %s.", r.st.Attempts, last.Outcome()))
			if !r.resendAsked() {
				return r.setState(model.DeliveryDelivered)
			}
			workflow.GetLogger(r.ctx).Info("resend", "webhook", r.in.WebhookID, "event", r.in.EventID)
			r.resending = true
			continue
		}
		// No attempt left, or the webhook is disabled.
		if err = r.exhaust(last); err != nil {
			return err
		}
		retried, err := r.awaitRetry()
		if err != nil {
			return err
		}
		if !retried {
			return r.endWindow()
		}
		workflow.GetLogger(r.ctx).Info("manual retry", "webhook", r.in.WebhookID, "event", r.in.EventID)
		if err = r.setState(model.DeliveryDelivering); err != nil {
			return err
		}
	}
}

// runSchedule makes an attempt, then one more after each delay of the schedule, until one
// delivers, finds the webhook gone or disabled, or none is left; it returns the last one's result.
func (r *deliveryRun) runSchedule() (activities.DeliverResult, error) {
	delays := r.in.Schedule
	if r.in.EventType == model.EventTest {
		delays = nil // spec 3.2: a failed test marks the webhook failing at once
	}
	for i := 0; ; i++ {
		var nextIn time.Duration // the schedule's delay after this attempt, jittered
		if i < len(delays) {
			nextIn = JitteredDelay(delays[i], r.in.Jitter, r.in.DeliveryID, r.st.Attempts+1)
		}
		last, err := r.attempt(nextIn)
		if err != nil {
			return last, r.endOnPermanentError(err)
		}
		r.startNotices(last.Notices)
		r.st.LastError = last.Error
		if last.Delivered || last.WebhookGone || last.WebhookDisabled || i == len(delays) {
			// A disabled webhook: no more attempts until it is enabled and the delivery retried.
			return last, nil
		}
		// The activity recorded the wait it chose: the schedule's, or longer when the receiver
		// sent Retry-After. The schedule is the floor: a receiver can delay the next attempt,
		// never bring it forward.
		if err = r.wait(max(nextIn, last.NextAttemptIn), last); err != nil {
			return last, err
		}
	}
}

// attempt makes the delivery's next attempt, nextIn being the schedule's delay after it (zero
// for the last). It is the one place that chooses how an attempt runs:
//   - the delivery's first attempt is a local activity, inside the workflow task that starts the
//     workflow: no activity task, no second workflow task (docs/operations.md, "The first attempt
//     is a local activity");
//   - a first attempt held back (the host or the endpoint at its cap, the rate limit, a breaker's
//     probe) is handed back by the local activity and made again as a regular activity, which may
//     wait its turn; when its turn is further out than that activity may wait, after sleeping
//     until the turn;
//   - every later attempt, a manual retry's first included, is a regular activity on the retry
//     task queue.
func (r *deliveryRun) attempt(nextIn time.Duration) (activities.DeliverResult, error) {
	r.st.Attempts++
	r.lastAttempt = workflow.Now(r.ctx)
	var maxDelay time.Duration
	if len(r.in.Schedule) > 0 {
		maxDelay = slices.Max(r.in.Schedule)
	}
	attemptIn := activities.DeliverInput{DeliveryID: r.in.DeliveryID, EventID: r.in.EventID, WebhookID: r.in.WebhookID, Attempt: r.st.Attempts,
		NextAttemptIn: nextIn, MaxRetryDelay: maxDelay, AttemptTimeout: r.in.AttemptTimeout, Resend: r.in.Resend || r.resending}
	summary := fmt.Sprintf("attempt %d", r.st.Attempts)
	if r.st.Attempts > 1 {
		return r.takeTurn(r.retried, attemptIn, summary)
	}
	var a *activities.Activities
	var res activities.DeliverResult
	err := workflow.ExecuteLocalActivity(withLocalSummary(r.local, summary), a.Deliver, attemptIn).Get(r.ctx, &res)
	if err != nil || !res.HostBusy {
		return res, err
	}
	if res.RetryIn > (activities.AttemptBudget{Timeout: r.in.AttemptTimeout}).Attempt() {
		// Its turn is further out than a regular attempt may wait for it in the worker: handed
		// back now, the attempt would only be held again with the same turn, at the cost of an
		// activity task and a workflow task. It sleeps until the turn first. A burst of 1,000
		// deliveries to a host where its account holds its whole share saves the Temporal server
		// those writes for each of them, which other accounts' starts and tasks queue behind
		// (issue 40).
		if err := r.awaitTurn(res); err != nil {
			return res, err
		}
	}
	return r.takeTurn(r.handBack, attemptIn, fmt.Sprintf("%s (%s)", summary, res.Outcome()))
}

// takeTurn makes an attempt as a regular activity on ctx until it has its turn at the receiver.
// One held back (its turn is beyond what it may wait in the worker) sleeps on a durable timer
// until the turn the worker booked for it, then comes back for it: a held attempt costs nothing
// while it waits, and comes back once per turn. A limits signal (the webhook's rate limit or
// concurrency changed) ends the sleep, so that the turn is re-timed under the new limits.
func (r *deliveryRun) takeTurn(ctx workflow.Context, in activities.DeliverInput, summary string) (activities.DeliverResult, error) {
	var a *activities.Activities
	for {
		var res activities.DeliverResult
		err := workflow.ExecuteActivity(withSummary(ctx, summary), a.Deliver, in).Get(r.ctx, &res)
		if err != nil || !res.HostBusy {
			return res, err
		}
		summary = fmt.Sprintf("attempt %d (%s)", in.Attempt, res.Outcome())
		if err := r.awaitTurn(res); err != nil {
			return res, err
		}
	}
}

// awaitTurn sleeps until the turn booked for a held attempt, or until a limits signal.
func (r *deliveryRun) awaitTurn(held activities.DeliverResult) error {
	timerCtx, cancelTimer := workflow.WithCancel(r.ctx)
	defer cancelTimer()
	summary := fmt.Sprintf("attempt %d %s; its turn in %s", r.st.Attempts, held.Outcome(), roundDelay(held.RetryIn))
	var timerErr error
	sel := workflow.NewSelector(r.ctx)
	sel.AddReceive(r.limits, func(c workflow.ReceiveChannel, _ bool) { drain(c) })
	sel.AddFuture(workflow.NewTimerWithOptions(timerCtx, held.RetryIn, workflow.TimerOptions{Summary: summary}), func(f workflow.Future) {
		timerErr = f.Get(r.ctx, nil)
	})
	sel.Select(r.ctx)
	return timerErr
}

// drain consumes every signal waiting on c: they are one request.
func drain(c workflow.ReceiveChannel) {
	var v converter.RawValue
	for c.ReceiveAsync(&v) {
	}
}

// wait waits d before the next attempt, last being the outcome of the one before. An operator's
// retry signal during the wait means "try now".
func (r *deliveryRun) wait(d time.Duration, last activities.DeliverResult) error {
	next := workflow.Now(r.ctx).Add(d)
	r.st.NextAttemptAt = &next
	if err := r.setState(model.DeliveryRetrying); err != nil {
		return err
	}
	summary := fmt.Sprintf("attempt %d: %s; attempt %d in %s", r.st.Attempts, last.Outcome(), r.st.Attempts+1, roundDelay(d))
	workflow.SetCurrentDetails(r.ctx, fmt.Sprintf("**retrying**: attempt %d: %s. Attempt %d at %s, or send the `retry` signal to make it now.",
		r.st.Attempts, last.Outcome(), r.st.Attempts+1, next.UTC().Format(time.RFC3339)))
	if _, err := r.sleepUnlessRetried(d, summary, ""); err != nil {
		return err
	}
	r.st.NextAttemptAt = nil
	return nil
}

// exhaust ends a schedule that ran out, last being its last attempt's outcome: the webhook is
// marked (failing, or disabled), and the notices the marking recorded are sent.
func (r *deliveryRun) exhaust(last activities.DeliverResult) error {
	var a *activities.Activities
	// A disabled webhook's delivery was recorded as exhausted by the activity, and its owner
	// was told when it was disabled.
	var res activities.ExhaustedResult
	if !last.WebhookDisabled {
		exhausted := activities.ExhaustedInput{DeliveryID: r.in.DeliveryID, WebhookID: r.in.WebhookID, EventID: r.in.EventID,
			LastError: last.Error, LastAttemptAt: last.AttemptedAt, LastErrorClass: last.ErrorClass, LastStatusCode: last.StatusCode,
			EventType: r.in.EventType}
		summary := fmt.Sprintf("attempt %d: %s; no attempts left", r.st.Attempts, last.Outcome())
		if err := workflow.ExecuteActivity(withSummary(r.db, summary), a.MarkExhausted, exhausted).Get(r.ctx, &res); err != nil {
			return err
		}
	}
	if err := r.setState(model.DeliveryExhausted); err != nil {
		return err
	}
	workflow.SetCurrentDetails(r.ctx, fmt.Sprintf("**exhausted** after %d attempt(s): %s. Send the `retry` signal to run the schedule again.",
		r.st.Attempts, last.Outcome()))
	r.startNotices(res.Notices)
	return nil
}

// startNotices starts the deliveries of the notices an activity recorded (docs/notifications.md),
// each its own event with its own delivery workflows. A start that fails is logged and left to the
// worker's sweeper, which starts what was committed and not started: the notice is not lost, and
// the delivery goes on.
func (r *deliveryRun) startNotices(events []int64) {
	for _, id := range events {
		ctx := withSummary(r.db, fmt.Sprintf("send notice %d", id))
		if err := workflow.ExecuteActivity(ctx, ActivityStartEventDeliveries, id).Get(r.ctx, nil); err != nil {
			workflow.GetLogger(r.ctx).Warn("notice not started; the sweeper will", "notice", id, "err", err)
		}
	}
}

// awaitRetry waits for an operator's retry in the retry window, and reports whether one came.
func (r *deliveryRun) awaitRetry() (bool, error) {
	return r.sleepUnlessRetried(r.in.RetryWindow, fmt.Sprintf("exhausted: waiting %s for a retry signal", r.in.RetryWindow),
		model.DeliveryExhausted)
}

// setState moves the run to state s, and its DeliveryState search attribute with it.
//
// A delivery is started without search attributes (dispatch.Dispatcher; a manual retry's new run
// excepted), and its first move to a state an operator may look for (retrying, exhausted, canceled)
// sets all of them. One delivered at its first attempt, the common case, is never indexed: each
// search attribute set or upserted makes the Temporal server write the run's visibility row again,
// and the start's and the delivered upsert's were 0.9 ms of its CPU per delivery
// (docs/performance-history.md). webhookd's own delivery log lists every delivery.
func (r *deliveryRun) setState(s string) error {
	r.st.State = s
	return r.upsertState(r.ctx, s)
}

// upsertState sets the DeliveryState search attribute to s through ctx, and the others with it if
// the run has none yet; a run not yet indexed that ends delivered is left unindexed.
func (r *deliveryRun) upsertState(ctx workflow.Context, s string) error {
	if r.searchable {
		return workflow.UpsertTypedSearchAttributes(ctx, AttrDeliveryState.ValueSet(s))
	}
	if s == model.DeliveryDelivered {
		return nil
	}
	r.searchable = true
	return workflow.UpsertTypedSearchAttributes(ctx, DeliverySearchAttributes(r.in.WebhookID, r.in.EventType, r.in.Variant, s)...)
}

// DeliverySearchAttributes are the search attributes of a delivery of an event of eventType to
// webhookID (of variant v) in state.
func DeliverySearchAttributes(webhookID int64, eventType string, v model.Variant, state string) []temporal.SearchAttributeUpdate {
	return []temporal.SearchAttributeUpdate{
		AttrWebhookID.ValueSet(webhookID),
		AttrEventType.ValueSet(eventType),
		AttrVariant.ValueSet(string(v)),
		AttrDeliveryState.ValueSet(state),
	}
}

// settle undoes the claim of a retry that asked for nothing more (takeRetries): its API request
// moved the delivery to delivering, and no attempt follows to record an outcome. It gives the
// delivery back to state.
func (r *deliveryRun) settle(state string) {
	var a *activities.Activities
	err := workflow.ExecuteActivity(r.db, a.SettleClaim, activities.SettleInput{DeliveryID: r.in.DeliveryID, State: state}).Get(r.ctx, nil)
	if err != nil {
		workflow.GetLogger(r.ctx).Error("claim not settled", "err", err)
	}
}

// resendAsked reports whether a retry signal waiting after a delivered attempt asks for a resend
// (a resend of a delivered delivery asked for while the attempt ran), consuming every one waiting
// (takeRetries). Signals that ask for nothing are settled.
func (r *deliveryRun) resendAsked() bool {
	if r.retry.Len() == 0 {
		return false
	}
	if takeRetries(r.ctx, r.retry, r.lastAttempt, true) {
		return true
	}
	r.settle(model.DeliveryDelivered)
	return false
}

// endCanceled ends a canceled delivery (its webhook was deleted, and the API canceled its
// workflow): the delivery row and DeliveryState become canceled, and the workflow ends as canceled
// with cause. The work runs on a disconnected context, because the workflow's is canceled.
func (r *deliveryRun) endCanceled(cause error) error {
	dctx, _ := workflow.NewDisconnectedContext(r.ctx)
	var a *activities.Activities
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(dctx, dbOptions()), a.CancelDelivery, r.in.DeliveryID).Get(dctx, nil); err != nil {
		return err
	}
	r.st.State, r.st.NextAttemptAt = model.DeliveryCanceled, nil
	if err := r.upsertState(dctx, model.DeliveryCanceled); err != nil {
		return err
	}
	workflow.GetLogger(r.ctx).Info("delivery canceled", "webhook", r.in.WebhookID, "event", r.in.EventID)
	return cause
}

// endWindow ends a delivery whose retry window closed. If its webhook was deleted and the delete
// could not cancel this workflow (Temporal was away), the delivery ends canceled, as it would have.
func (r *deliveryRun) endWindow() error {
	var a *activities.Activities
	var gone bool
	if err := workflow.ExecuteActivity(r.db, a.CancelIfWebhookGone, r.in.DeliveryID).Get(r.ctx, &gone); err != nil {
		return err
	}
	if gone {
		return r.setState(model.DeliveryCanceled)
	}
	return nil
}

// endOnPermanentError is what a Deliver error does to the workflow: it fails with it. An error
// no retry can fix (activities.PermanentErrorTypes; the activity already marked the delivery row
// exhausted) first sets DeliveryState to exhausted, so the delivery shows up in the Web UI with the
// others an operator has to look at, and a manual retry starts it again once the cause is fixed.
func (r *deliveryRun) endOnPermanentError(err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !slices.Contains(activities.PermanentErrorTypes, appErr.Type()) {
		return err
	}
	r.st.LastError = appErr.Error()
	workflow.GetLogger(r.ctx).Error("delivery ended by an internal error", "error_type", appErr.Type(), "err", err)
	if serr := r.setState(model.DeliveryExhausted); serr != nil {
		return serr
	}
	return err
}

// sleepUnlessRetried waits d on a durable timer, summary naming it in the Web UI; a retry signal that
// asks for an attempt (takeRetries) ends the wait early, and it reports whether one did. Signals
// that ask for nothing leave the timer running, after they are settled back to settleAs (unless
// it is empty).
func (r *deliveryRun) sleepUnlessRetried(d time.Duration, summary, settleAs string) (bool, error) {
	timerCtx, cancelTimer := workflow.WithCancel(r.ctx)
	defer cancelTimer()
	retried, fired := false, false
	var timerErr error
	sel := workflow.NewSelector(r.ctx)
	sel.AddReceive(r.retry, func(c workflow.ReceiveChannel, _ bool) {
		retried = takeRetries(r.ctx, c, r.lastAttempt, false)
		if !retried && settleAs != "" {
			r.settle(settleAs)
		}
	})
	sel.AddFuture(workflow.NewTimerWithOptions(timerCtx, d, workflow.TimerOptions{Summary: summary}), func(f workflow.Future) {
		fired = true
		timerErr = f.Get(r.ctx, nil)
	})
	for !retried && !fired {
		sel.Select(r.ctx)
	}
	if !retried && timerErr != nil {
		return false, timerErr
	}
	return retried, nil
}

// takeRetries consumes the retry signals waiting on retry (there is at least one) and reports
// whether one of them asks for an attempt: one that does not say when it was asked, or was asked
// after the last attempt started, and, when that attempt delivered, did not ask only for a
// delivery that fails (a recovery's). They are one request: the next attempt answers all of them.
// Without it, 50 concurrent resends of one delivery made 50 attempts, one per signal (issue 18).
// Signals that come in while that attempt runs wait for it, and then count as one resend at most;
// those asked before it started count for nothing. Receiving a signal issues no command, so this
// changes no history's shape.
func takeRetries(ctx workflow.Context, retry workflow.ReceiveChannel, lastAttempt time.Time, delivered bool) bool {
	var first converter.RawValue
	retry.Receive(ctx, &first)
	asks := asksAttempt(first, lastAttempt, delivered)
	for {
		var next converter.RawValue
		if !retry.ReceiveAsync(&next) {
			return asks
		}
		asks = asksAttempt(next, lastAttempt, delivered) || asks
	}
}

// asksAttempt reports whether a retry signal's payload asks for an attempt after the one that
// started at lastAttempt, delivered saying whether that attempt delivered. A payload that is not a
// RetryRequest is a plain retry, as no payload is.
func asksAttempt(v converter.RawValue, lastAttempt time.Time, delivered bool) bool {
	var req RetryRequest
	if p := v.Payload(); p == nil || converter.GetDefaultDataConverter().FromPayload(p, &req) != nil {
		return true
	}
	if req.UnlessDelivered && delivered {
		return false
	}
	return req.AskedAt.IsZero() || !req.AskedAt.Before(lastAttempt)
}

// JitteredDelay adds up to jitter*d to d. The fraction comes from a hash of the delivery and the
// attempt, so it is deterministic (as workflow code must be) yet differs between deliveries that
// failed together, and between the attempts of one delivery.
func JitteredDelay(d time.Duration, jitter float64, deliveryID int64, attempt int) time.Duration {
	if jitter <= 0 || d <= 0 {
		return d
	}
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(deliveryID))
	binary.LittleEndian.PutUint64(b[8:], uint64(attempt))
	_, _ = h.Write(b[:])
	u := float64(h.Sum64()>>11) / (1 << 53) // uniform in [0, 1)
	return d + time.Duration(u*jitter*float64(d))
}

// roundDelay rounds a wait for the Web UI: to the second, or to the millisecond under ten seconds
// (a schedule shortened for tests or demos).
func roundDelay(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
