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

// TaskQueue is the default task queue of the delivery worker (WEBHOOKD_TASK_QUEUE overrides it).
const TaskQueue = "webhookd"

// RetryTaskQueue names the task queue of retried attempts next to queue: retries have their own
// worker slots, so a backlog of them never starves the first attempts of fresh events.
func RetryTaskQueue(queue string) string { return queue + "-retry" }

// DefaultJitter is the largest fraction added to a retry delay (+10%), so that deliveries that
// failed together do not come back in one wave.
const DefaultJitter = 0.1

// Names an operator uses from the Temporal Web UI or CLI.
const (
	// SignalRetry runs an exhausted delivery's schedule again from the first attempt.
	SignalRetry = "retry"
	// QueryState returns a DeliveryState.
	QueryState = "state"
)

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

// DefaultSchedule is the delay before each retry: 1m, 5m, 15m, 1h, 6h (spec 6.4).
var DefaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}

// localRetryHorizon bounds the retries of a first attempt run as a local activity (our own
// infrastructure failing): ten years, that is, never in practice, as for a regular activity.
const localRetryHorizon = 10 * 365 * 24 * time.Hour

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
	AttemptTimeout time.Duration
	// RetryTaskQueue is where attempts after the first run; empty means the workflow's own queue
	// (workflows started before it existed).
	RetryTaskQueue string
	// Jitter is the largest fraction added to each retry delay; zero adds none.
	Jitter float64
	// PriorAttempts is how many attempts earlier runs of this delivery made: a run started by a
	// manual retry after the previous one ended numbers its attempts on from there.
	PriorAttempts int
	// LocalFirstAttempt runs the delivery's first attempt as a local activity, inside the workflow
	// task that starts the workflow: no activity task, no second workflow task (docs/operations.md,
	// "The first attempt is a local activity"). Later attempts stay regular activities on the retry
	// task queue. False in workflows started before it existed, which keep their shape.
	LocalFirstAttempt bool
}

// RetryRequest is the payload of a retry signal that a resend sends: when it was asked for. A signal
// without it (an operator's, from the Web UI or the CLI, or a batch retry's) asks for an attempt
// whenever it comes.
type RetryRequest struct {
	// AskedAt is when the resend's request came in. An attempt that started after it answers it,
	// so its signal, should it come in later still (behind 49 other concurrent resends, say), asks
	// for nothing more.
	AskedAt time.Time
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
// Attempts after the first run on the retry task queue; each delay gets its jitter, or is longer
// when the receiver asked with Retry-After. An attempt that finds the webhook disabled posts
// nothing: the delivery is held as exhausted and waits for the retry signal like any other.
//
// Canceling the workflow (the API does when the webhook is deleted) marks the delivery canceled,
// sets DeliveryState canceled and ends the workflow as canceled. An internal error no retry can fix
// sets DeliveryState exhausted and fails the workflow; a manual retry from the API starts a new
// run of an ended workflow (DeliveryInput.PriorAttempts carries the attempt count on).
func DeliveryWorkflow(ctx workflow.Context, in DeliveryInput) (_ DeliveryState, err error) {
	st := DeliveryState{State: model.DeliveryDelivering, Attempts: in.PriorAttempts}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (DeliveryState, error) { return st, nil }); err != nil {
		return st, err
	}
	defer func() {
		if ctx.Err() != nil && temporal.IsCanceledError(err) {
			err = endCanceled(ctx, in, &st, err)
		}
	}()
	retry := workflow.GetSignalChannel(ctx, SignalRetry)
	setState := func(s string) error {
		st.State = s
		return workflow.UpsertTypedSearchAttributes(ctx, AttrDeliveryState.ValueSet(s))
	}

	var a *activities.Activities
	deliverOpts := workflow.ActivityOptions{
		// The exchange, up to one more exchange's time waiting in the worker for its turn at a
		// busy receiver (Deliver takes what this leaves), and the record.
		StartToCloseTimeout: 2*in.AttemptTimeout + 10*time.Second,
		// A receiver's failure is a result, not an error, so only our own infrastructure failures
		// (the database) and a receiver host at its concurrency cap (which names its own next
		// retry time) are retried here, for as long as they last: giving up would lose the
		// delivery. The schedule below is the receiver's retry policy.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: activities.PermanentErrorTypes},
	}
	firstCtx := workflow.WithActivityOptions(ctx, deliverOpts)
	// The first attempt as a local activity: the same timeout and retry policy. A retry delay longer
	// than the workflow task timeout (a database outage, a busy host's appointment) becomes a
	// durable timer in the history, as a regular activity's would be. A local activity's retries
	// end at its ScheduleToClose, which defaults to one StartToClose: it is set far out, since
	// giving up on an outage would lose the delivery.
	localFirst := in.LocalFirstAttempt
	localCtx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: deliverOpts.StartToCloseTimeout, ScheduleToCloseTimeout: localRetryHorizon,
		RetryPolicy: deliverOpts.RetryPolicy,
	})
	retryCtx := firstCtx
	if in.RetryTaskQueue != "" {
		deliverOpts.TaskQueue = in.RetryTaskQueue
		retryCtx = workflow.WithActivityOptions(ctx, deliverOpts)
	}
	var maxDelay time.Duration
	if len(in.Schedule) > 0 {
		maxDelay = slices.Max(in.Schedule)
	}
	dbCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
	})
	mailCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Minute,
			MaximumAttempts: 20, NonRetryableErrorTypes: []string{activities.ErrTypeMail}},
	})

	var lastAttempt time.Time // when the last attempt started, for the retry signals' AskedAt
	// settle undoes the claim of a retry that asked for nothing more (takeRetries): its API
	// request moved the delivery to delivering, and no attempt follows to record an outcome.
	settle := func(state string) error {
		return workflow.ExecuteActivity(dbCtx, a.SettleClaim,
			activities.SettleInput{DeliveryID: in.DeliveryID, State: state}).Get(ctx, nil)
	}
	delays := in.Schedule
	if in.EventType == model.EventTest {
		delays = nil // spec 3.2: a failed test marks the webhook failing at once
	}
	// The Web UI tells the story at a glance: each attempt is named in its activity's summary, its
	// outcome in the summary of what follows it (the wait, or the exhaustion), and the workflow's
	// current details say where it stands. None of them carries the URL or anything secret.
	withSummary := func(ctx workflow.Context, summary string) workflow.Context {
		opts := workflow.GetActivityOptions(ctx)
		opts.Summary = summary
		return workflow.WithActivityOptions(ctx, opts)
	}
schedule:
	for {
		var last activities.DeliverResult
		var delay time.Duration // before the next attempt: the schedule's, jittered, or longer if the receiver asked
	attempts:
		for i := 0; i <= len(delays); i++ {
			if i > 0 {
				next := workflow.Now(ctx).Add(delay)
				st.NextAttemptAt = &next
				if err := setState(model.DeliveryRetrying); err != nil {
					return st, err
				}
				// An operator's retry signal during the wait means "try now".
				summary := fmt.Sprintf("attempt %d: %s; attempt %d in %s", st.Attempts, last.Outcome(), st.Attempts+1, roundDelay(delay))
				workflow.SetCurrentDetails(ctx, fmt.Sprintf("**retrying**: attempt %d: %s. Attempt %d at %s, or send the `retry` signal to make it now.",
					st.Attempts, last.Outcome(), st.Attempts+1, next.UTC().Format(time.RFC3339)))
				if _, err := sleepUnlessRetried(ctx, retry, delay, summary, lastAttempt, nil); err != nil {
					return st, err
				}
				st.NextAttemptAt = nil
			}
			var nextIn time.Duration
			if i < len(delays) {
				nextIn = JitteredDelay(delays[i], in.Jitter, in.DeliveryID, st.Attempts+1)
			}
			st.Attempts++
			lastAttempt = workflow.Now(ctx)
			attemptCtx := firstCtx
			if st.Attempts > 1 {
				attemptCtx = retryCtx
			}
			in := activities.DeliverInput{DeliveryID: in.DeliveryID, EventID: in.EventID, WebhookID: in.WebhookID, Attempt: st.Attempts,
				NextAttemptIn: nextIn, MaxRetryDelay: maxDelay, AttemptTimeout: in.AttemptTimeout}
			var err error
			summary := fmt.Sprintf("attempt %d", st.Attempts)
			if st.Attempts == 1 && localFirst {
				lopts := workflow.GetLocalActivityOptions(localCtx)
				lopts.Summary = summary
				err = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(localCtx, lopts), a.Deliver, in).Get(ctx, &last)
				if err == nil && last.HostBusy {
					// Held back (the host or the endpoint at its cap, the rate limit, a breaker's
					// probe): the same attempt as a regular activity, which may wait its turn.
					err = workflow.ExecuteActivity(withSummary(attemptCtx, fmt.Sprintf("%s (%s)", summary, last.Outcome())), a.Deliver, in).Get(ctx, &last)
				}
			} else {
				err = workflow.ExecuteActivity(withSummary(attemptCtx, summary), a.Deliver, in).Get(ctx, &last)
			}
			if err != nil {
				return st, endOnPermanentError(ctx, &st, setState, err)
			}
			st.LastError = last.Error
			switch {
			case last.WebhookGone:
				return st, setState(model.DeliveryCanceled)
			case last.Delivered:
				workflow.SetCurrentDetails(ctx, fmt.Sprintf("**delivered**: attempt %d: %s.", st.Attempts, last.Outcome()))
				if resendAsked(ctx, retry, lastAttempt, func() error { return settle(model.DeliveryDelivered) }) {
					workflow.GetLogger(ctx).Info("resend", "webhook", in.WebhookID, "event", in.EventID)
					continue schedule
				}
				return st, setState(model.DeliveryDelivered)
			case last.WebhookDisabled:
				break attempts // no more attempts until the webhook is enabled and the delivery retried
			}
			// The activity recorded the wait it chose (at least the schedule's, longer when the
			// receiver sent Retry-After); histories from before it did so carry zero.
			delay = max(nextIn, last.NextAttemptIn)
		}

		// A disabled webhook's delivery was recorded as exhausted by the activity, and its owner
		// was told when it was disabled.
		var res activities.ExhaustedResult
		if !last.WebhookDisabled {
			exhausted := activities.ExhaustedInput{DeliveryID: in.DeliveryID, WebhookID: in.WebhookID, EventID: in.EventID, LastError: last.Error, LastAttemptAt: last.AttemptedAt}
			summary := fmt.Sprintf("attempt %d: %s; no attempts left", st.Attempts, last.Outcome())
			if err := workflow.ExecuteActivity(withSummary(dbCtx, summary), a.MarkExhausted, exhausted).Get(ctx, &res); err != nil {
				return st, err
			}
		}
		if err := setState(model.DeliveryExhausted); err != nil {
			return st, err
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("**exhausted** after %d attempt(s): %s. Send the `retry` signal to run the schedule again.",
			st.Attempts, last.Outcome()))
		if res.Alert || res.Disabled {
			alert := activities.AlertInput{DeliveryID: in.DeliveryID, WebhookID: in.WebhookID, EventID: in.EventID, LastError: last.Error, Disabled: res.Disabled}
			summary := "e-mail the owner: webhook failing"
			if res.Disabled {
				summary = "e-mail the owner: webhook disabled"
			}
			if err := workflow.ExecuteActivity(withSummary(mailCtx, summary), a.SendAlert, alert).Get(ctx, nil); err != nil {
				// The webhook is already marked; a lost e-mail must not end the delivery.
				workflow.GetLogger(ctx).Error("alert not sent", "webhook", in.WebhookID, "err", err)
			}
		}

		// Wait for an operator's retry, or end when the window closes.
		retried, err := sleepUnlessRetried(ctx, retry, in.RetryWindow, fmt.Sprintf("exhausted: waiting %s for a retry signal", in.RetryWindow), lastAttempt,
			func() error { return settle(model.DeliveryExhausted) })
		if err != nil {
			return st, err
		}
		if !retried {
			return st, endWindow(ctx, dbCtx, in, setState)
		}
		workflow.GetLogger(ctx).Info("manual retry", "webhook", in.WebhookID, "event", in.EventID)
		if err := setState(model.DeliveryDelivering); err != nil {
			return st, err
		}
	}
}

// versionCancel marks the workflows that, canceled (their webhook was deleted), mark their
// delivery canceled and set DeliveryState before they end; older ones just ended.
const versionCancel = "cancel-cleanup"

// endCanceled ends a canceled delivery (its webhook was deleted, and the API canceled its
// workflow): the delivery row and DeliveryState become canceled, and the workflow ends as canceled
// with cause. The work runs on a disconnected context, because ctx is canceled.
func endCanceled(ctx workflow.Context, in DeliveryInput, st *DeliveryState, cause error) error {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	if workflow.GetVersion(dctx, versionCancel, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return cause
	}
	dctx = workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
	})
	var a *activities.Activities
	if err := workflow.ExecuteActivity(dctx, a.CancelDelivery, in.DeliveryID).Get(dctx, nil); err != nil {
		return err
	}
	st.State, st.NextAttemptAt = model.DeliveryCanceled, nil
	if err := workflow.UpsertTypedSearchAttributes(dctx, AttrDeliveryState.ValueSet(model.DeliveryCanceled)); err != nil {
		return err
	}
	workflow.GetLogger(ctx).Info("delivery canceled", "webhook", in.WebhookID, "event", in.EventID)
	return cause
}

// versionWindowEnd marks the workflows that, when their retry window closes, check whether their
// webhook was deleted meanwhile; older ones just ended.
const versionWindowEnd = "window-end-check"

// endWindow ends a delivery whose retry window closed. If its webhook was deleted and the delete
// could not cancel this workflow (Temporal was away), the delivery ends canceled, as it would have.
func endWindow(ctx, dbCtx workflow.Context, in DeliveryInput, setState func(string) error) error {
	if workflow.GetVersion(ctx, versionWindowEnd, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	var a *activities.Activities
	var gone bool
	if err := workflow.ExecuteActivity(dbCtx, a.CancelIfWebhookGone, in.DeliveryID).Get(ctx, &gone); err != nil {
		return err
	}
	if gone {
		return setState(model.DeliveryCanceled)
	}
	return nil
}

// versionPermanentError marks the workflows that, when Deliver fails with an internal error no
// retry can fix, set DeliveryState to exhausted before failing (a command the older ones lack).
const versionPermanentError = "permanent-internal-error"

// endOnPermanentError is what a Deliver error does to the workflow: it fails with it. An error
// no retry can fix (activities.PermanentErrorTypes; the activity already marked the delivery row
// exhausted) first sets DeliveryState to exhausted, so the delivery shows up in the Web UI with the
// others an operator has to look at, and a manual retry starts it again once the cause is fixed.
func endOnPermanentError(ctx workflow.Context, st *DeliveryState, setState func(string) error, err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !slices.Contains(activities.PermanentErrorTypes, appErr.Type()) {
		return err
	}
	if workflow.GetVersion(ctx, versionPermanentError, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return err
	}
	st.LastError = appErr.Error()
	workflow.GetLogger(ctx).Error("delivery ended by an internal error", "error_type", appErr.Type(), "err", err)
	if serr := setState(model.DeliveryExhausted); serr != nil {
		return serr
	}
	return err
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

// versionResend marks the workflows that, when a retry signal came in while the attempt that
// delivered ran, send the delivery once more (a resend of a delivered delivery asked for just then);
// older ones ended delivered and dropped the signal.
const versionResend = "resend-after-delivered"

// resendAsked reports whether a retry signal waiting after a delivered attempt asks for a resend,
// consuming every one waiting (takeRetries). It asks for the version only then, so the histories
// of every other delivery stay as they were. Signals that ask for nothing run settle.
func resendAsked(ctx workflow.Context, retry workflow.ReceiveChannel, lastAttempt time.Time, settle func() error) bool {
	if retry.Len() == 0 {
		return false
	}
	if !takeRetries(ctx, retry, lastAttempt) {
		if err := settle(); err != nil {
			workflow.GetLogger(ctx).Error("claim not settled", "err", err)
		}
		return false
	}
	return workflow.GetVersion(ctx, versionResend, workflow.DefaultVersion, 1) == 1
}

// takeRetries consumes the retry signals waiting on retry (there is at least one) and reports
// whether one of them asks for an attempt: one that does not say when it was asked, or was asked
// after the last attempt started. They are one request: the next attempt answers all of them.
// Without it, 50 concurrent resends of one delivery made 50 attempts, one per signal (issue 18).
// Signals that come in while that attempt runs wait for it, and then count as one resend at most;
// those asked before it started count for nothing. Receiving a signal issues no command, so this
// changes no history's shape.
func takeRetries(ctx workflow.Context, retry workflow.ReceiveChannel, lastAttempt time.Time) bool {
	var first converter.RawValue
	retry.Receive(ctx, &first)
	asks := asksAttempt(first, lastAttempt)
	for {
		var next converter.RawValue
		if !retry.ReceiveAsync(&next) {
			return asks
		}
		asks = asksAttempt(next, lastAttempt) || asks
	}
}

// asksAttempt reports whether a retry signal's payload asks for an attempt after the one that
// started at lastAttempt. A payload that is not a RetryRequest is a plain retry, as no payload is.
func asksAttempt(v converter.RawValue, lastAttempt time.Time) bool {
	var req RetryRequest
	if p := v.Payload(); p == nil || converter.GetDefaultDataConverter().FromPayload(p, &req) != nil {
		return true
	}
	return req.AskedAt.IsZero() || !req.AskedAt.Before(lastAttempt)
}

// sleepUnlessRetried waits d on a durable timer, summary naming it in the Web UI; a retry signal that
// asks for an attempt (takeRetries) ends the wait early, and it reports whether one did. Signals
// that ask for nothing leave the timer running, after settle (if not nil).
func sleepUnlessRetried(ctx workflow.Context, retry workflow.ReceiveChannel, d time.Duration, summary string, lastAttempt time.Time, settle func() error) (bool, error) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	retried, fired := false, false
	var timerErr error
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(retry, func(c workflow.ReceiveChannel, _ bool) {
		retried = takeRetries(ctx, c, lastAttempt)
		if !retried && settle != nil {
			if err := settle(); err != nil {
				workflow.GetLogger(ctx).Error("claim not settled", "err", err)
			}
		}
	})
	sel.AddFuture(workflow.NewTimerWithOptions(timerCtx, d, workflow.TimerOptions{Summary: summary}), func(f workflow.Future) {
		fired = true
		timerErr = f.Get(ctx, nil)
	})
	for !retried && !fired {
		sel.Select(ctx)
	}
	if !retried && timerErr != nil {
		return false, timerErr
	}
	return retried, nil
}
