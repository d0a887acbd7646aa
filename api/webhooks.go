package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

const (
	defaultPageSize = 50
	maxPageSize     = 200
)

// deliveryHandlers serves one variant's delivery engine: its webhooks, their deliveries, tests and
// retries, and its events.
type deliveryHandlers struct {
	*Server
	v *variant
}

func (h *deliveryHandlers) scope(c echo.Context) model.WebhookScope {
	return model.WebhookScope{AccountID: accountOf(c).ID, Variant: h.v.model}
}

// settings are a webhook's own settings as a request sends them: a field left out keeps its value
// (on create: the default), null clears it; version, left out or null, keeps the webhook's (on
// create: the newest version of its event type).
func settings(rateLimit, maxInFlight nullableInt, filter, ordering, headers, auth, tls, destination nullableJSON, version *jsonInt) webhooks.Settings {
	var v *int
	if version != nil {
		n := int(*version)
		v = &n
	}
	return webhooks.Settings{
		Version:     v,
		RateLimit:   model.LimitChange{Set: rateLimit.Set, To: rateLimit.Value},
		MaxInFlight: model.LimitChange{Set: maxInFlight.Set, To: maxInFlight.Value},
		Filter:      webhooks.FilterEdit{Set: filter.Set, JSON: filter.Value},
		Ordering:    webhooks.OrderingEdit{Set: ordering.Set, JSON: ordering.Value},
		Headers:     webhooks.HeadersEdit{Set: headers.Set, JSON: headers.Value},
		Auth:        webhooks.AuthEdit{Set: auth.Set, JSON: auth.Value},
		TLS:         webhooks.TLSEdit{Set: tls.Set, JSON: tls.Value},
		Destination: webhooks.DestinationEdit{Set: destination.Set, JSON: destination.Value},
	}
}

type createWebhookRequest struct {
	URL         string       `json:"url"`
	EventType   string       `json:"eventType"`
	RateLimit   nullableInt  `json:"rateLimit"`
	MaxInFlight nullableInt  `json:"maxInFlight"`
	Filter      nullableJSON `json:"filter"`
	Ordering    nullableJSON `json:"ordering"`
	Headers     nullableJSON `json:"headers"`
	Auth        nullableJSON `json:"auth"`
	TLS         nullableJSON `json:"tls"`
	Destination nullableJSON `json:"destination"`
	Version     *jsonInt     `json:"version"`
}

type updateWebhookRequest struct {
	URL         string       `json:"url"`
	EventType   *string      `json:"eventType"`
	RateLimit   nullableInt  `json:"rateLimit"`
	MaxInFlight nullableInt  `json:"maxInFlight"`
	Filter      nullableJSON `json:"filter"`
	Ordering    nullableJSON `json:"ordering"`
	Headers     nullableJSON `json:"headers"`
	Auth        nullableJSON `json:"auth"`
	TLS         nullableJSON `json:"tls"`
	Destination nullableJSON `json:"destination"`
	Version     *jsonInt     `json:"version"`
}

// patchWebhookRequest changes the settings only (limits, filter, ordering, headers, auth, tls, version). url and eventType are read only
// to refuse them with a pointer to PUT, whatever their value, rather than as unknown fields.
type patchWebhookRequest struct {
	URL         json.RawMessage `json:"url"`
	EventType   json.RawMessage `json:"eventType"`
	RateLimit   nullableInt     `json:"rateLimit"`
	MaxInFlight nullableInt     `json:"maxInFlight"`
	Filter      nullableJSON    `json:"filter"`
	Ordering    nullableJSON    `json:"ordering"`
	Headers     nullableJSON    `json:"headers"`
	Auth        nullableJSON    `json:"auth"`
	TLS         nullableJSON    `json:"tls"`
	Destination nullableJSON    `json:"destination"`
	Version     *jsonInt        `json:"version"`
}

func (h *deliveryHandlers) create(c echo.Context) error {
	var req createWebhookRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	w, secret, err := h.webhooks.Create(c.Request().Context(), h.scope(c), webhooks.Registration{
		URL: req.URL, EventType: req.EventType, Settings: settings(req.RateLimit, req.MaxInFlight, req.Filter, req.Ordering, req.Headers, req.Auth, req.TLS, req.Destination, req.Version)})
	if err != nil {
		return err
	}
	return h.show(c, http.StatusCreated, w, secret, "Webhook created")
}

// show answers with webhook w as the variant presents it, its custom headers and authentication
// redacted.
func (h *deliveryHandlers) show(c echo.Context, status int, w *model.Webhook, secret, message string) error {
	r, err := h.redact(w)
	if err != nil {
		return err
	}
	return c.JSON(status, h.v.success(h.v.present(w, secret, r), message))
}

// redact opens what a representation of w shows of its sealed settings, redacted.
func (h *deliveryHandlers) redact(w *model.Webhook) (redacted, error) {
	headers, err := h.webhooks.RedactedHeaders(w)
	if err != nil {
		return redacted{}, err
	}
	auth, err := h.webhooks.RedactedAuth(w)
	if err != nil {
		return redacted{}, err
	}
	t, err := h.webhooks.RedactedTLS(w)
	if err != nil {
		return redacted{}, err
	}
	d, err := h.webhooks.RedactedDestination(w)
	if err != nil {
		return redacted{}, err
	}
	return redacted{Headers: headers, Auth: authView(auth), TLS: tlsView(t), Destination: destinationView(d)}, nil
}

func (h *deliveryHandlers) list(c echo.Context) error {
	q := c.QueryParams()
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := model.WebhookFilter{Limit: limit, After: after, EventType: q.Get("eventType"), Status: q.Get("status")}
	page := f
	page.Limit++
	hooks, err := h.webhooks.List(c.Request().Context(), h.scope(c), page)
	if err != nil {
		return err
	}
	hooks = trimPage(c, hooks, f.Limit, func(w *model.Webhook) int64 { return w.ID })
	data := make([]any, len(hooks))
	for i := range hooks {
		r, err := h.redact(&hooks[i])
		if err != nil {
			return err
		}
		data[i] = h.v.present(&hooks[i], "", r)
	}
	return c.JSON(http.StatusOK, h.v.success(data, "Webhooks retrieved"))
}

func (h *deliveryHandlers) get(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	return h.show(c, http.StatusOK, w, "", "Webhook retrieved")
}

func (h *deliveryHandlers) update(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	var req updateWebhookRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.EventType != nil {
		return validationFailed("eventType", "eventType cannot be changed; register a new webhook for another event type")
	}
	w, err := h.webhooks.Update(c.Request().Context(), h.scope(c), id, req.URL, settings(req.RateLimit, req.MaxInFlight, req.Filter, req.Ordering, req.Headers, req.Auth, req.TLS, req.Destination, req.Version))
	if err != nil {
		return notFoundAsWebhook(err)
	}
	return h.show(c, http.StatusOK, w, "", "Webhook updated")
}

// patch is PATCH <collection>/<id> {rateLimit?, maxInFlight?, filter?, ordering?, headers?, auth?, tls?, version?}: the webhook's own settings and nothing
// else. Unlike PUT it leaves the status and the failure record alone, since the receiver is the same.
func (h *deliveryHandlers) patch(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	var req patchWebhookRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.URL != nil {
		return validationFailed("url", "url cannot be changed by PATCH; use PUT, which also resets the status")
	}
	if req.EventType != nil {
		return validationFailed("eventType", "eventType cannot be changed; register a new webhook for another event type")
	}
	w, err := h.webhooks.SetSettings(c.Request().Context(), h.scope(c), id, settings(req.RateLimit, req.MaxInFlight, req.Filter, req.Ordering, req.Headers, req.Auth, req.TLS, req.Destination, req.Version))
	if err != nil {
		return notFoundAsWebhook(err)
	}
	return h.show(c, http.StatusOK, w, "", "Webhook updated")
}

func (h *deliveryHandlers) delete(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := h.webhooks.Delete(c.Request().Context(), h.scope(c), id); err != nil {
		return notFoundAsWebhook(err)
	}
	return c.JSON(http.StatusOK, h.v.success(nil, "Webhook deleted"))
}

type secretResponse struct {
	Secret                  string   `json:"secret"`
	PreviousSecretExpiresAt *isoTime `json:"previousSecretExpiresAt,omitempty"`
}

func (h *deliveryHandlers) secret(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	_, plain, err := h.webhooks.Reveal(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAsWebhook(err)
	}
	return c.JSON(http.StatusOK, h.v.success(secretResponse{Secret: plain}, "Webhook secret retrieved"))
}

// rotateSecretRequest is the optional body of POST .../secret/rotate: a secret of the caller's
// own, as Svix and Stripe take one; absent or null, webhookd makes one.
type rotateSecretRequest struct {
	Secret *string `json:"secret"`
}

func (h *deliveryHandlers) rotateSecret(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	var req rotateSecretRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	r, err := h.webhooks.RotateSecret(c.Request().Context(), h.scope(c), id, req.Secret)
	if err != nil {
		return notFoundAsWebhook(err)
	}
	expires := isoTime(r.PreviousUntil)
	return c.JSON(http.StatusOK, h.v.success(secretResponse{Secret: r.Secret, PreviousSecretExpiresAt: &expires}, "Webhook secret rotated; the previous secret keeps signing for 24 hours"))
}

func (h *deliveryHandlers) load(c echo.Context) (*model.Webhook, error) {
	id, err := webhookID(c)
	if err != nil {
		return nil, err
	}
	w, err := h.webhooks.Get(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return nil, notFoundAsWebhook(err)
	}
	return w, nil
}

type filterTestRequest struct {
	Filter    json.RawMessage `json:"filter"`
	EventType string          `json:"eventType"`
	Limit     *jsonInt        `json:"limit"`
}

// trialStopped ends the message of a trial that stopped early, by its reason.
var trialStopped = map[string]string{
	webhooks.TrialStoppedByBytes: fmt.Sprintf("; it stopped after %d MiB of event data, before the limit", webhooks.MaxTrialBytes>>20),
	webhooks.TrialStoppedByTime:  fmt.Sprintf("; it stopped after %v, before the limit", webhooks.MaxTrialTime),
}

// filterTest is POST <collection>/filter-test {filter, eventType, limit?}: the filter tried, as
// delivery would judge, against the account's most recent events of that type; nothing is saved.
func (h *deliveryHandlers) filterTest(c echo.Context) error {
	var req filterTestRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	limit := 0
	if req.Limit != nil {
		if limit = int(*req.Limit); limit == 0 {
			limit = -1 // 0 is out of range, not the default
		}
	}
	t, err := h.webhooks.TryFilter(c.Request().Context(), h.scope(c), req.Filter, req.EventType, limit)
	if err != nil {
		return err
	}
	// truncatedBy is null, not absent, for a whole trial: one shape per variant.
	var truncatedBy *string
	message := fmt.Sprintf("The filter matched %d of %d event(s)", t.Matched, t.Scanned)
	if t.TruncatedBy != "" {
		truncatedBy = &t.TruncatedBy
		message += trialStopped[t.TruncatedBy]
	}
	body := map[string]any{"scanned": t.Scanned, "matched": t.Matched, "matchedIds": t.MatchedIDs,
		"truncated": truncatedBy != nil, "truncatedBy": truncatedBy}
	return c.JSON(http.StatusOK, h.v.success(body, message))
}
