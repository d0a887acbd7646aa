package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// maxIdempotencyKey bounds the Idempotency-Key header, as Stripe does.
const maxIdempotencyKey = 255

type eventRequest struct {
	EventType string          `json:"eventType"` // variant A
	Event     string          `json:"event"`     // variant B
	Data      json.RawMessage `json:"data"`
}

// publishEvent is POST <prefix>/events: other systems hand webhookd an event to deliver.
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
	switch {
	case eventType == "":
		return validationFailed(typeField, "%s is required", typeField)
	case !h.v.model.Registrable(eventType):
		return validationFailed(typeField, "unknown %s %q; one of %v", typeField, eventType, h.v.model.EventTypes())
	}
	if len(req.Data) == 0 || string(req.Data) == "null" {
		return validationFailed("data", "data is required")
	}
	data, err := wire.CanonicalJSON(req.Data)
	// A number beyond float64's range (1e400) is a value out of its field's range, which the
	// validation below names (422), as it names 9007199254740993; it is not malformed JSON.
	beyondFloat := errors.Is(err, strconv.ErrRange)
	if errors.Is(err, wire.ErrDuplicateKey) {
		return invalidField("data", "data repeats an object key: %v", err)
	} else if err != nil && !beyondFloat {
		return invalidField("data", "data is not valid JSON")
	}
	// The data as sent, not its canonical form, whose float64 numbers have already rounded an
	// unsafe integer to another one.
	if err := sources.ValidateEventData(eventType, req.Data); err != nil {
		var de *model.DataError
		if errors.As(err, &de) {
			return validationFailed(de.Field, "%s %s", de.Field, de.Reason)
		}
		return err
	}
	if beyondFloat {
		return validationFailed("data", "data holds a number beyond the range of a JSON number (about ±1.8e308)")
	}
	key := c.Request().Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return invalidField("Idempotency-Key", "Idempotency-Key must be at most %d printable ASCII characters", maxIdempotencyKey)
	}
	res, err := h.webhooks.Publish(c.Request().Context(), model.NewEvent{
		AccountID: accountOf(c).ID, Variant: h.v.model, EventType: eventType, Data: string(data),
		IdempotencyKey: key, RequestHash: model.HashRequest(eventType, string(data)),
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
