package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/wire"
)

// retryDelivery is POST <collection>/<id>/deliveries/<deliveryId>/retry: the delivery is sent again,
// whatever its state (DESIGN.md's manual retry, for one delivery). A delivered one is sent once more
// with the same webhook-id, so its receiver can tell the resend from a new event.
func (h *deliveryHandlers) retryDelivery(c echo.Context) error {
	w, deliveryID, err := h.loadDelivery(c)
	if err != nil {
		return err
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	// Resends that arrive together are one: an attempt that starts after this one arrived answers
	// it, however long it then waited for the database or Temporal.
	ref, err := h.webhooks.Resend(c.Request().Context(), w, deliveryID, arrivedAt(c))
	if err != nil {
		return notFoundAs(err, "delivery")
	}
	body := map[string]any{"deliveryId": deliveryID, "messageId": wire.MessageID(ref.EventID, w.ID)}
	return c.JSON(http.StatusAccepted, h.v.success(body, "Delivery queued to be sent again"))
}

// loadDelivery reads the webhook and the delivery id of a .../deliveries/:deliveryId path.
func (h *deliveryHandlers) loadDelivery(c echo.Context) (*model.Webhook, int64, error) {
	w, err := h.load(c)
	if err != nil {
		return nil, 0, err
	}
	id, ok := parseID(c.Param("deliveryId"))
	if !ok || id < 1 {
		return nil, 0, invalidField("deliveryId", "delivery id must be a positive integer")
	}
	return w, id, nil
}

// retry is POST <collection>/<id>/retry: the webhook is enabled if it was disabled, every exhausted
// delivery of it runs its schedule again, in the background (a RetryWebhookWorkflow, whose id the
// answer gives with the count), and a variant B webhook gets a fresh test event.
func (h *deliveryHandlers) retry(c echo.Context) error {
	if err := decodeNoBody(c); err != nil {
		return err
	}
	w, err := h.load(c)
	if err != nil {
		return err
	}
	r, err := h.webhooks.Retry(c.Request().Context(), w)
	if err != nil {
		return err
	}
	body := map[string]any{"retried": r.Count, "workflowId": nil}
	if r.WorkflowID != "" {
		body["workflowId"] = r.WorkflowID
	}
	if r.Test != nil {
		body["testEventId"] = r.Test.Event.ID
	}
	return c.JSON(http.StatusAccepted, h.v.success(body, fmt.Sprintf("Retrying %d delivery(ies)", r.Count)))
}

type recoverRequest struct {
	Since *string `json:"since"`
	Until *string `json:"until"`
}

// recoverSince is POST <collection>/<id>/recover: every delivery of the webhook created in [since,
// until) that did not succeed is retried, in the background (a RecoverWorkflow), and the answer
// says how many, and which workflow. until defaults to the time of the request that starts the
// recovery: identical requests agree, the ones that come while it runs joining it.
func (h *deliveryHandlers) recoverSince(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	var req recoverRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var r webhooks.Recovery
	if req.Since == nil {
		return validationFailed("since", "since is required")
	}
	if r.Since, err = parseTime("since", *req.Since); err != nil {
		return err
	}
	if req.Until != nil {
		until, err := parseTime("until", *req.Until)
		if err != nil {
			return err
		}
		r.Until = &until
	}
	rec, err := h.webhooks.Recover(c.Request().Context(), w, r)
	if err != nil {
		return err
	}
	var workflowID *string
	if rec.WorkflowID != "" {
		workflowID = &rec.WorkflowID
	}
	body := map[string]any{"queued": rec.Queued, "since": isoTime(r.Since), "until": isoTime(rec.Until), "workflowId": workflowID}
	return c.JSON(http.StatusAccepted, h.v.success(body, fmt.Sprintf("Recovering %d delivery(ies)", rec.Queued)))
}

// parseTime reads an ISO 8601 (RFC 3339) time of a request field.
func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalidField(field, "%s must be an ISO 8601 time such as 2026-11-23T10:00:00Z", field)
	}
	return t.UTC(), nil
}

// test is POST <collection>/<id>/test: a webhook.test event to this webhook alone, in the
// variant's body shape, answered with its delivery, which the delivery log then follows.
func (h *deliveryHandlers) test(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	res, err := h.webhooks.SendTest(c.Request().Context(), w)
	if err != nil {
		return notFoundAsWebhook(err) // deleted meanwhile
	}
	body := map[string]any{"eventId": res.Event.ID, h.v.spec.TypeField: model.EventTest, "deliveryId": res.Deliveries[0].ID,
		"messageId": wire.MessageID(res.Event.ID, w.ID)}
	return c.JSON(http.StatusAccepted, h.v.success(body, "Test event sent"))
}

func optionalTime(t *time.Time) *isoTime {
	if t == nil {
		return nil
	}
	v := isoTime(*t)
	return &v
}
