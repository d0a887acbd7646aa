package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
)

// eventJSON is a stored event as GET <prefix>/events lists it. The type is named as intake names it:
// eventType in variant A, event in variant B; exactly one of the two is set.
type eventJSON struct {
	ID             int64              `json:"id"`
	EventType      string             `json:"eventType,omitempty"`
	Event          string             `json:"event,omitempty"`
	Data           json.RawMessage    `json:"data"`
	OccurredAt     isoTime            `json:"occurredAt"`
	Matched        int                `json:"matched"`
	Filtered       int                `json:"filtered"`
	DeliveryStates deliveryStatesJSON `json:"deliveryStates"`
}

// deliveryStatesJSON counts an event's deliveries by state, every state always present, so that a
// client finds the events that need attention without reading each one.
type deliveryStatesJSON struct {
	Pending    int `json:"pending"`
	Delivering int `json:"delivering"`
	Retrying   int `json:"retrying"`
	Delivered  int `json:"delivered"`
	Exhausted  int `json:"exhausted"`
	Canceled   int `json:"canceled"`
}

// eventDetailJSON is one event as GET <prefix>/events/:id shows it: the list's shape and every
// delivery of the event.
type eventDetailJSON struct {
	eventJSON
	Deliveries []eventDeliveryJSON `json:"deliveries"`
}

// eventDeliveryJSON is one delivery of an event; its attempts are at
// GET <collection>/<webhookId>/deliveries/<id>.
type eventDeliveryJSON struct {
	ID            int64    `json:"id"`
	WebhookID     int64    `json:"webhookId"`
	State         string   `json:"state"`
	Attempts      int      `json:"attempts"`
	LastError     *string  `json:"lastError"`
	NextAttemptAt *isoTime `json:"nextAttemptAt"`
	CreatedAt     isoTime  `json:"createdAt"`
	UpdatedAt     isoTime  `json:"updatedAt"`
}

func (h *deliveryHandlers) presentEvent(ev *model.Event, states map[string]int) eventJSON {
	out := eventJSON{
		ID: ev.ID, Data: json.RawMessage(ev.Data), OccurredAt: isoTime(ev.OccurredAt), Matched: ev.Matched, Filtered: ev.Filtered,
		DeliveryStates: deliveryStatesJSON{
			Pending: states[model.DeliveryPending], Delivering: states[model.DeliveryDelivering],
			Retrying: states[model.DeliveryRetrying], Delivered: states[model.DeliveryDelivered],
			Exhausted: states[model.DeliveryExhausted], Canceled: states[model.DeliveryCanceled],
		},
	}
	if h.v.spec.TypeField == "event" {
		out.Event = ev.EventType
	} else {
		out.EventType = ev.EventType
	}
	return out
}

// listEvents is GET <prefix>/events: the account's events of the variant, ordered by id, each with
// its data and the count of its deliveries by state (one query per page, whatever its size). A page
// ends early once its events' data reaches MaxPageBytes.
func (h *deliveryHandlers) listEvents(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := model.EventFilter{Limit: limit, After: after, EventType: c.QueryParam("eventType"), MaxBytes: MaxPageBytes}
	if f.Since, err = timeParam(c, "since"); err != nil {
		return err
	}
	if f.Until, err = timeParam(c, "until"); err != nil {
		return err
	}
	page, err := h.webhooks.EventLog(c.Request().Context(), h.scope(c), f)
	if err != nil {
		return err
	}
	if page.More {
		setNextLink(c, f.Limit, "after", page.Last)
	}
	return writeList(c, h, page.Events, func(ev *model.Event) any { return h.presentEvent(ev, page.States[ev.ID]) }, "Events retrieved")
}

// getEvent is GET <prefix>/events/:id: one event with every delivery it made, those to webhooks
// deleted since included.
func (h *deliveryHandlers) getEvent(c echo.Context) error {
	id, err := pathID(c, "event")
	if err != nil {
		return err
	}
	ev, deliveries, err := h.webhooks.Event(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAs(err, "event")
	}
	states := map[string]int{}
	out := eventDetailJSON{Deliveries: make([]eventDeliveryJSON, len(deliveries))}
	for i, d := range deliveries {
		states[d.State]++
		out.Deliveries[i] = eventDeliveryJSON{
			ID: d.ID, WebhookID: d.WebhookID, State: d.State, Attempts: d.Attempts, LastError: d.LastError,
			NextAttemptAt: optionalTime(d.NextAttemptAt), CreatedAt: isoTime(d.CreatedAt), UpdatedAt: isoTime(d.UpdatedAt),
		}
	}
	out.eventJSON = h.presentEvent(ev, states)
	return c.JSON(http.StatusOK, h.v.success(out, "Event retrieved"))
}

// timeParam reads an optional ISO 8601 time from the query: nil when absent, 400 when malformed,
// 422 outside the years 0001 to 9999 (UTC) that every stored time falls in.
func timeParam(c echo.Context, name string) (*time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	t, err := parseTime(name, s)
	if err != nil && strings.Contains(s, " ") {
		// An offset's unencoded '+' arrives as a space.
		return nil, invalidField(name, "%s must be an ISO 8601 time such as 2026-11-23T10:00:00Z; send an offset's '+' as %%2B", name)
	}
	if err != nil {
		return nil, err
	}
	if !input.TimeInRange(t) {
		return nil, validationFailed(name, "%s must be in the years 0001 to 9999 (UTC)", name)
	}
	return &t, nil
}
