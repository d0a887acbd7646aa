package portal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/wire"
)

// The event log, an event's payload and deliveries, a delivery's attempts with resend, and
// recover: issue 20's pages on what was sent. They read through the queries of the REST event and
// delivery logs (api/eventlog.go, api/deliverylog.go) and act through the dispatch calls of
// api/deliveries.go.

// eventPageNames are this file's and deliveries.go's templates, each rendered inside layout.html.
var eventPageNames = []string{"events", "event", "delivery", "recover", "recovered", "failures"}

// eventLogLimit is how many events a page of the event log shows.
const eventLogLimit = 50

// eventLogMaxBytes bounds a page by its events' data as the REST log does (api.MaxPageBytes): the
// list shows no data, but ListEvents reads it.
const eventLogMaxBytes = 1 << 20

// localTimeLayouts are what a datetime-local input sends (with and without seconds); the portal
// reads them as UTC, and the pages say so.
var localTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05"}

// localTimeFormat writes a time back into a datetime-local input.
const localTimeFormat = "2006-01-02T15:04:05"

// registerEventRoutes adds the event log, event, delivery and recover pages to the portal.
func registerEventRoutes(g *echo.Group, s *Server, read, write []echo.MiddlewareFunc) error {
	funcs := template.FuncMap{"time": formatTime, "join": strings.Join}
	for _, name := range eventPageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("portal template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	h := &eventHandlers{Server: s}
	g.GET("/events", h.list, read...)
	g.GET("/events/:id", h.event, read...)
	g.GET("/failures", h.failures, read...)
	g.GET("/deliveries/:id", h.delivery, read...)
	g.POST("/deliveries/:id/resend", h.resend, write...)
	g.GET("/webhooks/:id/recover", h.confirmRecover, read...)
	g.POST("/webhooks/:id/recover", h.recover, write...)
	return nil
}

// eventHandlers serve the pages on events and deliveries, for the session's account and variant
// only, as the REST API's handlers serve its caller's.
type eventHandlers struct {
	*Server
}

// eventRow is one event of the log with its deliveries counted by state.
type eventRow struct {
	*model.Event
	Deliveries int
	States     []stateCount
}

type stateCount struct {
	State string
	N     int
}

// deliveryStates are the states in the order the pages list them.
var deliveryStates = model.DeliveryStates

// eventLogQuery is the event log's filter as the page's form sends it.
type eventLogQuery struct {
	Type, Since, Until string
}

// values is the query string of the filter, for the next page's link.
func (q eventLogQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"type": q.Type, "since": q.Since, "until": q.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// list is GET /portal/events: the session's events, newest first, filtered by type and time, in
// pages that follow one another by id (?before=), as the REST log's pages do by ?after=.
func (h *eventHandlers) list(c echo.Context) error {
	session := sessionOf(c)
	q := eventLogQuery{Type: c.QueryParam("type"), Since: c.QueryParam("since"), Until: c.QueryParam("until")}
	types := append(session.Variant.EventTypes(), model.EventTest)
	data := map[string]any{"Title": "Event log", "Query": q, "Types": types}
	f := model.EventFilter{NewestFirst: true, Limit: eventLogLimit, MaxBytes: eventLogMaxBytes}
	var problems []string
	f.EventType = q.Type
	var err error
	if f.Since, err = localTime("From", q.Since); err != nil {
		problems = append(problems, err.Error()+".")
	}
	if f.Until, err = localTime("To", q.Until); err != nil {
		problems = append(problems, err.Error()+".")
	}
	if s := c.QueryParam("before"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			problems = append(problems, "The page cursor is not valid; start again from the first page.")
		}
		f.Before = id
	}
	var page *model.EventPage
	if len(problems) == 0 {
		// The REST log's rules: the variant's types and the test event, a window in order.
		page, err = h.webhooks.EventLog(c.Request().Context(), session.Scope(), f)
		var invalid *webhooks.InvalidError
		switch {
		case errors.As(err, &invalid) && invalid.Field == "eventType":
			problems = append(problems, "Pick an event type from the list.")
		case errors.As(err, &invalid) && invalid.Field == "since":
			problems = append(problems, "“From” must be before “to”.")
		case err != nil:
			return err
		}
	}
	if len(problems) > 0 {
		data["FormError"] = strings.Join(problems, " ")
		return h.render(c, http.StatusBadRequest, "events", data)
	}
	states := page.States
	rows := make([]eventRow, len(page.Events))
	for i := range page.Events {
		rows[i] = eventRow{Event: &page.Events[i]}
		for _, st := range deliveryStates {
			if n := states[page.Events[i].ID][st]; n > 0 {
				rows[i].Deliveries += n
				rows[i].States = append(rows[i].States, stateCount{State: st, N: n})
			}
		}
	}
	data["Events"] = rows
	data["First"] = f.Before == 0
	data["Reset"] = "/portal/events?" + q.values().Encode()
	if page.More {
		next := q.values()
		next.Set("before", strconv.FormatInt(page.Last, 10))
		data["Next"] = "/portal/events?" + next.Encode()
	}
	return h.render(c, http.StatusOK, "events", data)
}

// localTime reads a datetime-local value as UTC: nil when empty. label names the input in the
// error, which the page shows.
func localTime(label, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	for _, layout := range localTimeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			if !input.TimeInRange(t) {
				break
			}
			return &t, nil
		}
	}
	return nil, fmt.Errorf("“%s”: %q is not a time such as 2026-11-23T10:00 (UTC), in the years 0001 to 9999", label, s)
}

// payload is a delivery body as a receiver gets it: the exact bytes, and the same indented.
type payload struct {
	// To names the endpoint whose secret signed a variant B body; empty for variant A, whose body
	// is one for every endpoint.
	To     string
	Raw    string
	Pretty string
	// Unsigned says that the body lacks variant B's signature field: its endpoint is deleted.
	Unsigned bool
}

func newPayload(body []byte) payload {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, body, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(body)
	}
	return payload{Raw: string(body), Pretty: pretty.String()}
}

// bodyFor is the body the next attempt to w sends, as activities.Deliver builds it: its data in
// w's version, and in variant B signed with w's current secret. The signature is sent to the receiver anyway and reveals nothing
// of the secret, which the page never shows.
func (h *eventHandlers) bodyFor(w *model.Webhook, ev *model.Event) (payload, error) {
	layout := w.Variant.Spec().Body
	var secret string
	if layout != wire.LayoutA {
		var err error
		if secret, err = h.webhooks.Secret(w); err != nil {
			return payload{}, err
		}
	}
	// The data in the version of its type that w receives (docs/events.md, "Versions").
	data, err := h.webhooks.DataFor(ev, w)
	if err != nil {
		return payload{}, err
	}
	return newPayload(wire.Body(layout, ev.EventType, data, ev.OccurredAt, secret)), nil
}

// eventDelivery is one delivery of an event, with its endpoint when that is still there.
type eventDelivery struct {
	model.Delivery
	Endpoint *model.Webhook
}

// event is GET /portal/events/:id: the event's payload as its receivers get it, and its deliveries
// (those of endpoints deleted since included, as in the REST log).
func (h *eventHandlers) event(c echo.Context) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	ctx := c.Request().Context()
	session := sessionOf(c)
	ev, deliveries, err := h.webhooks.Event(ctx, session.Scope(), id)
	if err != nil {
		return err
	}
	// The session's live endpoints, in one query: a delivery's endpoint deleted since is not among
	// them, and its delivery stays in the event's history without one.
	hooks, err := h.webhooks.List(ctx, session.Scope(), model.WebhookFilter{Limit: maxListed})
	if err != nil {
		return err
	}
	live := make(map[int64]*model.Webhook, len(hooks))
	for i := range hooks {
		live[hooks[i].ID] = &hooks[i]
	}
	rows := make([]eventDelivery, len(deliveries))
	layout := session.Variant.Spec().Body
	var payloads []payload
	for i, d := range deliveries {
		rows[i] = eventDelivery{Delivery: d}
		w, ok := live[d.WebhookID]
		if !ok {
			continue
		}
		rows[i].Endpoint = w
		if to := w.VersionOf(ev.EventType); layout == wire.LayoutA && (to == 0 || to >= ev.Version) {
			// Variant A's body is the same for every endpoint that gets the event's version.
			continue
		}
		p, err := h.bodyFor(w, ev)
		if err != nil {
			return err
		}
		p.To = fmt.Sprintf("endpoint %d (%s)", w.ID, w.URL)
		payloads = append(payloads, p)
	}
	if layout == wire.LayoutA || len(payloads) == 0 {
		// Variant A's body is the same for every endpoint of the event's version (those pinned to
		// an older one are shown above). A variant B event with no live endpoint left is shown as
		// its signature covers it.
		p := newPayload(wire.LoggedBody(layout, ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt))
		p.Unsigned = layout != wire.LayoutA
		payloads = append([]payload{p}, payloads...)
	}
	return h.render(c, http.StatusOK, "event", map[string]any{
		"Title": fmt.Sprintf("Event %d", ev.ID), "Event": ev, "Payloads": payloads, "Deliveries": rows,
		"SignatureField": wire.SignatureField, "VariantB": layout != wire.LayoutA,
	})
}
