package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Batch retries: a webhook-wide retry and a recovery each run as a workflow of one activity
// (package dispatch's), which claims and hands over one delivery at a time and resumes after a
// crash where its heartbeat says it stopped.

// RecoverInput starts a RecoverWorkflow: the webhook, the window (its end as a time, also when the
// request left it open), and the largest delivery id the recovery covers.
type RecoverInput struct {
	WebhookID    int64
	Since, Until time.Time
	UpTo         int64
}

// RecoverWorkflowID names a recovery by the request that asks for it: the webhook, since, and
// until as given, or "now" when it was left open. Nothing in it changes as the recovery runs, nor
// with the time of the request, so identical requests find the same workflow while it runs.
func RecoverWorkflowID(webhookID int64, since, until time.Time) string {
	end := "now"
	if !until.IsZero() {
		end = until.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("recover:%d:%s/%s", webhookID, since.UTC().Format(time.RFC3339Nano), end)
}

// batchHeartbeatTimeout is how long a batch retry's activity may go without a heartbeat before
// Temporal runs it again, so it is also how soon a batch resumes after its worker died. It beats
// after every delivery (the SDK sends at most one heartbeat per 80% of this), and one delivery is
// two database writes and one Temporal call.
const batchHeartbeatTimeout = 10 * time.Second

// runBatchRetry runs a batch retry's one activity (RecoverDeliveries, RetryExhausted), which
// resumes after a crash where its heartbeat says it stopped, and returns how many it retried.
func runBatchRetry(ctx workflow.Context, summary, activity string, in any) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    batchHeartbeatTimeout,
		// Temporal or the database away: keep trying; retrying a delivery twice is harmless.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute},
		Summary:     summary,
	})
	var retried int
	err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &retried)
	return retried, err
}

// RecoverWorkflow retries the deliveries of a recovery, a batch at a time, in one activity that
// resumes after a crash where its heartbeat says it stopped.
func RecoverWorkflow(ctx workflow.Context, in RecoverInput) (int, error) {
	return runBatchRetry(ctx, fmt.Sprintf("retry the failed deliveries of webhook %d up to delivery %d", in.WebhookID, in.UpTo), ActivityRecoverDeliveries, in)
}

// RetryWebhookInput starts a RetryWebhookWorkflow: the webhook, and the largest id of its
// deliveries that were exhausted when the retry was asked for.
type RetryWebhookInput struct {
	WebhookID int64
	UpTo      int64
}

// RetryWebhookWorkflowID names a webhook-wide retry by what it covers, so that asking twice finds
// the first.
func RetryWebhookWorkflowID(in RetryWebhookInput) string {
	return fmt.Sprintf("retry:%d:%d", in.WebhookID, in.UpTo)
}

// RetryWebhookWorkflow runs the schedule of a webhook's exhausted deliveries again, a batch at a
// time, as RecoverWorkflow does for a recovery.
func RetryWebhookWorkflow(ctx workflow.Context, in RetryWebhookInput) (int, error) {
	return runBatchRetry(ctx, fmt.Sprintf("retry the exhausted deliveries of webhook %d up to delivery %d", in.WebhookID, in.UpTo), ActivityRetryExhausted, in)
}
