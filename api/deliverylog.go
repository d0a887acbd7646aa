package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

type attemptJSON struct {
	Attempt      int     `json:"attempt"`
	URL          string  `json:"url"`
	StartedAt    isoTime `json:"startedAt"`
	StatusCode   *int    `json:"statusCode"`
	ErrorClass   *string `json:"errorClass"`
	Error        *string `json:"error"`
	LatencyMS    int64   `json:"latencyMs"`
	ResponseBody *string `json:"responseBody"`
	// RequestHeaders is what the attempt sent, without its signature; null for attempts made
	// before webhookd kept them.
	RequestHeaders json.RawMessage `json:"requestHeaders"`
}

type deliveryJSON struct {
	ID            int64         `json:"id"`
	EventID       int64         `json:"eventId"`
	EventType     string        `json:"eventType"`
	State         string        `json:"state"`
	Attempts      int           `json:"attempts"`
	NextAttemptAt *isoTime      `json:"nextAttemptAt"`
	LastError     *string       `json:"lastError"`
	CreatedAt     isoTime       `json:"createdAt"`
	UpdatedAt     isoTime       `json:"updatedAt"`
	AttemptLog    []attemptJSON `json:"attemptLog"`
}

// deliveryDetailJSON is one delivery as GET .../deliveries/:deliveryId shows it: with the
// Standard Webhooks message id and the body it sends, rebuilt from the event.
type deliveryDetailJSON struct {
	deliveryJSON
	MessageID string          `json:"messageId"`
	Payload   json.RawMessage `json:"payload"`
}

func newDeliveryJSON(v *model.DeliveryView) deliveryJSON {
	d := deliveryJSON{
		ID: v.ID, EventID: v.EventID, EventType: v.EventType, State: v.State, Attempts: v.Attempts,
		LastError: v.LastError, CreatedAt: isoTime(v.CreatedAt), UpdatedAt: isoTime(v.UpdatedAt), AttemptLog: []attemptJSON{},
	}
	d.NextAttemptAt = optionalTime(v.NextAttemptAt)
	for _, a := range v.Log {
		var headers json.RawMessage
		if a.RequestHeaders != nil {
			headers = json.RawMessage(*a.RequestHeaders)
		}
		d.AttemptLog = append(d.AttemptLog, attemptJSON{
			Attempt: a.Attempt, URL: a.URL, StartedAt: isoTime(a.StartedAt), StatusCode: a.StatusCode,
			ErrorClass: a.ErrorClass, Error: a.Error, LatencyMS: a.LatencyMS, ResponseBody: a.ResponseBody,
			RequestHeaders: headers,
		})
	}
	return d
}

// deliveries is GET <collection>/<id>/deliveries: the webhook's deliveries, newest first, each
// with its attempt log. ?before=<delivery id> pages back; a page ends early once its attempt logs
// carry MaxPageBytes.
func (h *deliveryHandlers) deliveries(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	limit, before, err := backPageParams(c, "delivery")
	if err != nil {
		return err
	}
	page, err := h.webhooks.Deliveries(c.Request().Context(), h.scope(c), model.DeliveryQuery{
		WebhookID: w.ID, Before: before, Order: model.NewestFirst, Limit: limit, MaxBytes: MaxPageBytes, Include: model.IncludeAttempts})
	if err != nil {
		return err
	}
	if page.More {
		setNextLink(c, limit, "before", page.Last)
	}
	return writeList(c, h, page.Views, func(v *model.DeliveryView) any { return newDeliveryJSON(v) }, "Deliveries retrieved")
}

// delivery is GET <collection>/<id>/deliveries/<deliveryId>: one delivery with every attempt, the
// headers each attempt sent (signatures left out) and the body, rebuilt from the event (variant
// B's without its signature field).
func (h *deliveryHandlers) delivery(c echo.Context) error {
	w, deliveryID, err := h.loadDelivery(c)
	if err != nil {
		return err
	}
	_, v, err := h.webhooks.Delivery(c.Request().Context(), h.scope(c), w.ID, deliveryID, model.IncludeAttempts|model.IncludeEvent)
	if err != nil {
		return notFoundAs(err, "delivery")
	}
	// As the receiver gets it: the data in the webhook's version of its type (docs/events.md).
	data, err := h.webhooks.DataFor(v.Event(w.Variant), w)
	if err != nil {
		return err
	}
	payload := wire.LoggedBody(w.Variant.Spec().Body, v.EventType, data, v.EventOccurredAt)
	out := deliveryDetailJSON{deliveryJSON: newDeliveryJSON(v), MessageID: wire.MessageID(v.EventID, w.ID), Payload: payload}
	return c.JSON(http.StatusOK, h.v.success(out, "Delivery retrieved"))
}
