package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

type eventRequest struct {
	EventType string          `json:"eventType"` // variant A
	Event     string          `json:"event"`     // variant B
	Data      json.RawMessage `json:"data"`
}

// publishEvent is POST <prefix>/events: other systems hand webhookd an event to deliver. The
// intake's rules are the use case's (webhooks.Service.Accept); the handler reads the request.
func (h *deliveryHandlers) publishEvent(c echo.Context) error {
	var req eventRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	// The request type holds both names; the variant table says which one is this variant's.
	typeField := h.v.spec.TypeField
	eventType, stray, strayField := req.EventType, req.Event, "event"
	if typeField == "event" {
		eventType, stray, strayField = req.Event, req.EventType, "eventType"
	}
	if stray != "" {
		return invalidField(strayField, "unknown field %q; variant %s names the type in %q", strayField, h.v.model, typeField)
	}
	res, err := h.webhooks.Accept(c.Request().Context(), h.scope(c), webhooks.Intake{
		EventType: eventType, Data: req.Data, IdempotencyKey: c.Request().Header.Get("Idempotency-Key"),
	})
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	body := map[string]any{"id": res.Event.ID, typeField: eventType, "matched": res.Event.Matched}
	msg := fmt.Sprintf("Event accepted for %d webhook(s)", res.Event.Matched)
	return c.JSON(http.StatusAccepted, h.v.success(body, msg))
}

// eventTypes is GET <prefix>/event-types: the catalog of the event types a webhook of the variant
// may subscribe to, each with a description and an example of its data that intake accepts.
func (h *deliveryHandlers) eventTypes(c echo.Context) error {
	return c.JSON(http.StatusOK, h.v.success(sources.EventCatalog(h.v.model), "Event types retrieved"))
}
