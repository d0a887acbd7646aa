package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/webhookd/webhookd/model"
)

// Error types of internal failures that no retry can fix. Deliver raises them non-retryable, so a
// delivery that hits one ends at once, visibly (the delivery exhausted with the reason as its last
// error, the workflow failed, webhookd_delivery_internal_failures_total counted, an error logged),
// instead of retrying every minute forever. Transient failures (the database away) stay plain
// errors, which Temporal retries for as long as they last.
const (
	// ErrTypeDeliveryMissing: the workflow's delivery row does not exist.
	ErrTypeDeliveryMissing = "DeliveryMissing"
	// ErrTypeSecretUnreadable: the webhook's signing secret cannot be opened with the current
	// WEBHOOKD_SECRET_KEY (the key was changed, or the sealed value is damaged).
	ErrTypeSecretUnreadable = "SecretUnreadable"
	// ErrTypeVersionUnconvertible: the event's data cannot be converted down to the version the
	// webhook receives (a defect of a version's down function: docs/events.md, "Versions").
	ErrTypeVersionUnconvertible = "VersionUnconvertible"
)

// PermanentErrorTypes are the error types of Deliver that end a delivery: the workflow lists
// them as non-retryable too.
var PermanentErrorTypes = []string{ErrTypeBadInput, ErrTypeDeliveryMissing, ErrTypeSecretUnreadable, ErrTypeVersionUnconvertible}

// failPermanently ends a delivery on an internal failure no retry can fix. The delivery row (when
// there is one) is exhausted with reason as its last error, so the API lists it and a manual retry
// picks it up once an operator has fixed the cause. Should that write fail, its error is returned
// as it is: a transient failure that Temporal retries.
func (a *Activities) failPermanently(ctx context.Context, in DeliverInput, errType, reason string, cause error) error {
	if errType != ErrTypeDeliveryMissing {
		if err := model.HoldDelivery(ctx, a.DB, in.DeliveryID, "internal error: "+reason); err != nil {
			return err
		}
	}
	if a.Metrics != nil {
		a.Metrics.InternalFailures.WithLabelValues(errType).Inc()
	}
	activity.GetLogger(ctx).Error("delivery ended by an internal error no retry can fix", "delivery", in.DeliveryID,
		"webhook", in.WebhookID, "event", in.EventID, "error_type", errType, "reason", reason, "err", cause)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("delivery %d: %s", in.DeliveryID, reason), errType, cause)
}
