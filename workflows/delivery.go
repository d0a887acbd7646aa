// Package workflows holds webhookd's Temporal workflows. They are deterministic: time comes from
// workflow.Now and durable timers, ids from inputs, and every side effect runs in an activity.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
)

// TaskQueue is the default task queue of the delivery worker (WEBHOOKD_TASK_QUEUE overrides it).
const TaskQueue = "webhookd"

// Names an operator uses from the Temporal Web UI or CLI.
const (
	// SignalRetry runs an exhausted delivery's schedule again from the first attempt.
	SignalRetry = "retry"
	// QueryState returns a DeliveryState.
	QueryState = "state"
)

// Search attributes of delivery workflows (registered on the namespace by `make run` and the tests).
var (
	AttrWebhookID     = temporal.NewSearchAttributeKeyInt64("WebhookId")
	AttrEventType     = temporal.NewSearchAttributeKeyKeyword("EventType")
	AttrVariant       = temporal.NewSearchAttributeKeyKeyword("Variant")
	AttrDeliveryState = temporal.NewSearchAttributeKeyKeyword("DeliveryState")
)

// DefaultSchedule is the delay before each retry: 1m, 5m, 15m, 1h, 6h (spec 6.4).
var DefaultSchedule = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}

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
func DeliveryWorkflow(ctx workflow.Context, in DeliveryInput) (DeliveryState, error) {
	st := DeliveryState{State: model.DeliveryDelivering}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (DeliveryState, error) { return st, nil }); err != nil {
		return st, err
	}
	retry := workflow.GetSignalChannel(ctx, SignalRetry)
	setState := func(s string) error {
		st.State = s
		return workflow.UpsertTypedSearchAttributes(ctx, AttrDeliveryState.ValueSet(s))
	}

	var a *activities.Activities
	deliverCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.AttemptTimeout + 10*time.Second,
		// A receiver's failure is a result, not an error, so only our own infrastructure failures
		// (the database) are retried here, for as long as they last: giving up would lose the
		// delivery. The schedule below is the receiver's retry policy.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}},
	})
	dbCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
	})
	mailCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Minute,
			MaximumAttempts: 20, NonRetryableErrorTypes: []string{activities.ErrTypeMail}},
	})

	delays := in.Schedule
	if in.EventType == model.EventTest {
		delays = nil // spec 3.2: a failed test marks the webhook failing at once
	}
	for {
		var last activities.DeliverResult
		for i := 0; i <= len(delays); i++ {
			if i > 0 {
				next := workflow.Now(ctx).Add(delays[i-1])
				st.NextAttemptAt = &next
				if err := setState(model.DeliveryRetrying); err != nil {
					return st, err
				}
				// An operator's retry signal during the wait means "try now".
				if _, err := sleepUnlessRetried(ctx, retry, delays[i-1]); err != nil {
					return st, err
				}
				st.NextAttemptAt = nil
			}
			var nextIn time.Duration
			if i < len(delays) {
				nextIn = delays[i]
			}
			st.Attempts++
			in := activities.DeliverInput{DeliveryID: in.DeliveryID, EventID: in.EventID, WebhookID: in.WebhookID, Attempt: st.Attempts, NextAttemptIn: nextIn}
			if err := workflow.ExecuteActivity(deliverCtx, a.Deliver, in).Get(ctx, &last); err != nil {
				return st, err
			}
			switch {
			case last.WebhookGone:
				return st, setState(model.DeliveryCanceled)
			case last.Delivered:
				st.LastError = ""
				return st, setState(model.DeliveryDelivered)
			}
			st.LastError = last.Error
		}

		exhausted := activities.ExhaustedInput{DeliveryID: in.DeliveryID, WebhookID: in.WebhookID, EventID: in.EventID, LastError: last.Error, LastAttemptAt: last.AttemptedAt}
		var res activities.ExhaustedResult
		if err := workflow.ExecuteActivity(dbCtx, a.MarkExhausted, exhausted).Get(ctx, &res); err != nil {
			return st, err
		}
		if err := setState(model.DeliveryExhausted); err != nil {
			return st, err
		}
		if res.Alert {
			alert := activities.AlertInput{DeliveryID: in.DeliveryID, WebhookID: in.WebhookID, EventID: in.EventID, LastError: last.Error}
			if err := workflow.ExecuteActivity(mailCtx, a.SendAlert, alert).Get(ctx, nil); err != nil {
				// The webhook is already marked failing; a lost e-mail must not end the delivery.
				workflow.GetLogger(ctx).Error("alert not sent", "webhook", in.WebhookID, "err", err)
			}
		}

		// Wait for an operator's retry, or end when the window closes.
		retried, err := sleepUnlessRetried(ctx, retry, in.RetryWindow)
		if err != nil || !retried {
			return st, err
		}
		workflow.GetLogger(ctx).Info("manual retry", "webhook", in.WebhookID, "event", in.EventID)
		if err := setState(model.DeliveryDelivering); err != nil {
			return st, err
		}
	}
}

// sleepUnlessRetried waits d on a durable timer; a retry signal ends the wait early, and it reports
// whether one did.
func sleepUnlessRetried(ctx workflow.Context, retry workflow.ReceiveChannel, d time.Duration) (bool, error) {
	timerCtx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	retried := false
	var timerErr error
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(retry, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		retried = true
	})
	sel.AddFuture(workflow.NewTimer(timerCtx, d), func(f workflow.Future) { timerErr = f.Get(ctx, nil) })
	sel.Select(ctx)
	if !retried && timerErr != nil {
		return false, timerErr
	}
	return retried, nil
}
