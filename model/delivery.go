package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
	"github.com/webhookd/webhookd/input"
)

// WebhookDeliveryRef returns the reference of one delivery of a webhook, for a retry of it alone,
// or ErrNotFound when the webhook has no delivery of that id.
func WebhookDeliveryRef(ctx context.Context, db bun.IDB, webhookID, deliveryID int64) (DeliveryRef, error) {
	refs, err := readRefs(ctx, db, DeliveryQuery{WebhookID: webhookID, DeliveryID: deliveryID}, "find delivery")
	if err != nil {
		return DeliveryRef{}, err
	}
	if len(refs) == 0 {
		return DeliveryRef{}, ErrNotFound
	}
	return refs[0], nil
}

// Recovery selects the deliveries a recovery retries: those of one webhook, created in
// [Since, Until), that have not succeeded: exhausted, or still waiting in their schedule. UpTo, when
// set, bounds their ids, so that a recovery retries what was there when it was asked for and not
// the deliveries that arrive while it runs.
type Recovery struct {
	WebhookID int64
	Since     time.Time
	Until     time.Time
	UpTo      int64
}

// Check refuses a window that is empty, starts in the future or leaves the years 0001 to 9999, with
// a *DataError naming the field.
func (r Recovery) Check(now time.Time) error {
	switch {
	case !input.TimeInRange(r.Since):
		return &input.DataError{Field: "since", Reason: "must be in the years 0001 to 9999 (UTC)"}
	case !input.TimeInRange(r.Until):
		return &input.DataError{Field: "until", Reason: "must be in the years 0001 to 9999 (UTC)"}
	case !r.Since.Before(r.Until):
		return &input.DataError{Field: "since", Reason: "must be before until"}
	case r.Since.After(now):
		return &input.DataError{Field: "since", Reason: "must not be in the future"}
	}
	return nil
}

// Query is the read of the deliveries r selects.
func (r Recovery) Query() DeliveryQuery {
	return DeliveryQuery{WebhookID: r.WebhookID, States: RecoverableStates, Since: r.Since, Until: r.Until, UpTo: r.UpTo}
}

// readRefs reads the references of the deliveries q selects; what names the read in its error.
func readRefs(ctx context.Context, db bun.IDB, q DeliveryQuery, what string) ([]DeliveryRef, error) {
	page, err := ReadDeliveries(ctx, db, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return page.Refs(), nil
}
