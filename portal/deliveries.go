package portal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/wire"
)

// responseShown is how much of a receiver's response the delivery page shows: its first KiB.
const responseShown = 1 << 10

// header is one request header an attempt sent.
type header struct {
	Name, Value string
}

// attemptRow is one attempt as the delivery page shows it.
type attemptRow struct {
	model.Attempt
	Response  string
	Truncated bool
	// Headers is nil for attempts made before webhookd kept them.
	Headers []header
}

// liveStates are the states of a delivery whose page follows it (follow.js): more may happen.
var liveStates = model.UnderwayStates

// loadDelivery reads the :id delivery within the session's scope, with what include asks for, and
// its webhook: the read itself is scoped (the session's account and variant, a live webhook of
// it), as the REST API reaches a delivery only through its webhook. Any other id is 404.
func (h *eventHandlers) loadDelivery(c echo.Context, include model.DeliveryInclude) (*model.Webhook, *model.DeliveryView, error) {
	id, ok := webhookID(c)
	if !ok {
		return nil, nil, errNotFound
	}
	return h.webhooks.Delivery(c.Request().Context(), sessionOf(c).Scope(), 0, id, include)
}

// delivery is GET /portal/deliveries/:id: the delivery's state and every attempt, the headers each
// sent without the signature, and the body its next attempt sends.
func (h *eventHandlers) delivery(c echo.Context) error {
	w, v, err := h.loadDelivery(c, model.IncludeAttempts|model.IncludeEvent)
	if err != nil {
		return err
	}
	id := v.ID
	attempts := make([]attemptRow, len(v.Log))
	for i, a := range v.Log {
		attempts[i] = attemptRow{Attempt: a}
		if a.ResponseBody != nil {
			attempts[i].Response, attempts[i].Truncated = firstBytes(*a.ResponseBody, responseShown)
		}
		if a.RequestHeaders != nil {
			if attempts[i].Headers, err = sentHeaders(*a.RequestHeaders); err != nil {
				return fmt.Errorf("delivery %d attempt %d: %w", id, a.Attempt, err)
			}
		}
	}
	// Newest first: the attempt a person waits for is on top.
	slices.Reverse(attempts)
	body, err := h.bodyFor(w, v.Event(w.Variant))
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "delivery", map[string]any{
		"Title": fmt.Sprintf("Delivery %d", v.ID), "Delivery": v, "Endpoint": w, "Attempts": attempts, "Payload": body,
		"MessageID": wire.MessageID(v.EventID, w.ID), "Live": slices.Contains(liveStates, v.State),
		"Resendable": v.State != model.DeliveryCanceled, "Resent": c.QueryParam("resent") != "",
		"VariantB": w.Variant.Spec().Body != wire.LayoutA,
	})
}

// firstBytes cuts s to at most n bytes at a character boundary, and says whether it cut.
func firstBytes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// sentHeaders reads an attempt's logged headers, sorted by name. The log is written before the
// signature is added (activities.sentHeaders); webhook-signature is dropped here as well, so that no
// row written otherwise ever shows one.
func sentHeaders(raw string) ([]header, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("logged request headers: %w", err)
	}
	out := make([]header, 0, len(m))
	for k, v := range m {
		if strings.EqualFold(k, wire.HeaderSignature) {
			continue
		}
		out = append(out, header{Name: k, Value: v})
	}
	slices.SortFunc(out, func(a, b header) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// resend is POST /portal/deliveries/:id/resend: the delivery is sent again whatever its state, as
// POST .../deliveries/:deliveryId/retry does, then the delivery page follows it.
func (h *eventHandlers) resend(c echo.Context) error {
	asked := model.Now()
	w, v, err := h.loadDelivery(c, 0)
	if err != nil {
		return err
	}
	id := v.ID
	// As the API's: resends that arrive together are one.
	if _, err = h.webhooks.Resend(c.Request().Context(), w, id, asked); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("%sdeliveries/%d?resent=1", Prefix, id))
}

// confirmRecover is GET /portal/webhooks/:id/recover?since=: how many deliveries a recovery since
// that time would resend (webhooks.Service.CountRecoverable, the count dispatch.Recover starts
// with), and the form that confirms it. Without since, the last 24 hours.
func (h *eventHandlers) confirmRecover(c echo.Context) error {
	w, err := h.loadWebhook(c)
	if err != nil {
		return err
	}
	now := model.Now()
	raw := c.QueryParam("since")
	if raw == "" {
		raw = now.Add(-24 * time.Hour).Format(localTimeFormat)
	}
	data := map[string]any{"Title": "Recover failed deliveries", "Endpoint": w, "Since": raw}
	r, problem := recovery(raw)
	n := 0
	if problem == "" {
		n, err = h.webhooks.CountRecoverable(c.Request().Context(), w, r)
		problem, _ = h.formProblem(err)
	}
	if problem != "" {
		data["FormError"] = problem
		return h.render(c, http.StatusBadRequest, "recover", data)
	}
	if err != nil {
		return err
	}
	data["Count"], data["Counted"], data["SinceTime"] = n, true, r.Since
	return h.render(c, http.StatusOK, "recover", data)
}

// recover is POST /portal/webhooks/:id/recover: POST <collection>/<id>/recover {since}, its
// window ending at the time of the request.
func (h *eventHandlers) recover(c echo.Context) error {
	w, err := h.loadWebhook(c)
	if err != nil {
		return err
	}
	raw := c.FormValue("since")
	// Until now, as the API's recover without until: identical requests agree.
	r, problem := recovery(raw)
	var rec dispatch.Recovering
	if problem == "" {
		rec, err = h.webhooks.Recover(c.Request().Context(), w, r)
		problem, _ = h.formProblem(err)
	}
	if problem != "" {
		return h.render(c, http.StatusBadRequest, "recover", map[string]any{
			"Title": "Recover failed deliveries", "Endpoint": w, "Since": raw, "FormError": problem})
	}
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "recovered", map[string]any{
		"Title": "Recovery queued", "Endpoint": w, "Queued": rec.Queued, "Since": r.Since})
}

// recovery is the window since raw (datetime-local, UTC) until the recovery starts; a problem a
// person can read, or "". The use case checks the window.
func recovery(raw string) (webhooks.Recovery, string) {
	since, err := localTime("Since", raw)
	if err != nil {
		return webhooks.Recovery{}, err.Error() + "."
	}
	if since == nil {
		return webhooks.Recovery{}, "Say since when to recover."
	}
	return webhooks.Recovery{Since: *since}, ""
}

// loadWebhook reads the :id webhook within the session's scope, as the endpoints page does.
func (h *eventHandlers) loadWebhook(c echo.Context) (*model.Webhook, error) {
	return (&endpointHandlers{Server: h.Server}).load(c)
}
