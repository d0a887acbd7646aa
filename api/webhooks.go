package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
)

const (
	defaultPageSize = 50
	maxPageSize     = 200
	// secretOverlap is how long a rotated-out secret keeps signing beside the new one.
	secretOverlap = model.SecretOverlap
	// The ranges of a webhook's own limits (issue 17). Beyond them a limit would not limit: the
	// worker's per-host cap and its slots bind long before.
	maxRateLimit   = 10000
	maxMaxInFlight = 1000
	// retimeTimeout bounds the signals that re-time a webhook's held attempts after its limits
	// changed.
	retimeTimeout = time.Minute
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

type createWebhookRequest struct {
	URL         string      `json:"url"`
	EventType   string      `json:"eventType"`
	RateLimit   nullableInt `json:"rateLimit"`
	MaxInFlight nullableInt `json:"maxInFlight"`
}

type updateWebhookRequest struct {
	URL         string      `json:"url"`
	EventType   *string     `json:"eventType"`
	RateLimit   nullableInt `json:"rateLimit"`
	MaxInFlight nullableInt `json:"maxInFlight"`
}

// patchWebhookRequest changes the limits only. url and eventType are read only to refuse them with
// a pointer to PUT, whatever their value, rather than as unknown fields.
type patchWebhookRequest struct {
	URL         json.RawMessage `json:"url"`
	EventType   json.RawMessage `json:"eventType"`
	RateLimit   nullableInt     `json:"rateLimit"`
	MaxInFlight nullableInt     `json:"maxInFlight"`
}

// checkLimits refuses a webhook's limits out of range, naming the field.
func checkLimits(rateLimit, maxInFlight nullableInt) error {
	if err := rateLimit.within("rateLimit", 1, maxRateLimit); err != nil {
		return err
	}
	return maxInFlight.within("maxInFlight", 1, maxMaxInFlight)
}

func limitsChange(rateLimit, maxInFlight nullableInt) model.LimitsChange {
	return model.LimitsChange{
		RateLimit:   model.LimitChange{Set: rateLimit.Set, To: rateLimit.Value},
		MaxInFlight: model.LimitChange{Set: maxInFlight.Set, To: maxInFlight.Value},
	}
}

func (h *deliveryHandlers) create(c echo.Context) error {
	var req createWebhookRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := h.checkEventType(req.EventType); err != nil {
		return err
	}
	if err := checkLimits(req.RateLimit, req.MaxInFlight); err != nil {
		return err
	}
	if err := h.checkURL(c, req.URL); err != nil {
		return err
	}
	secret, sealed, err := h.secrets.NewSealedWebhookSecret()
	if err != nil {
		return err
	}
	now := model.Now()
	w := &model.Webhook{
		AccountID: accountOf(c).ID, Variant: h.v.model, URL: req.URL, EventType: req.EventType,
		Status: h.v.model.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now,
		RateLimit: req.RateLimit.Value, MaxInFlight: req.MaxInFlight.Value,
	}
	// A variant B webhook and its test event commit together: no webhook without its test.
	err = h.publisher.Change(c.Request().Context(), func(ctx context.Context, cs *model.ChangeSet) error {
		if err := model.CreateWebhook(ctx, cs.Tx, w, h.maxWebhooks); err != nil {
			return err
		}
		if !h.v.spec.TestEvent {
			return nil
		}
		_, err := cs.Emit(ctx, testEvent(w))
		return err
	})
	if errors.Is(err, model.ErrLimitReached) {
		return &apiError{status: http.StatusUnprocessableEntity, code: codeLimitExceeded,
			message: fmt.Sprintf("this account already has %d webhooks; delete one first", h.maxWebhooks)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, h.v.success(h.v.present(w, secret), "Webhook created"))
}

func (h *deliveryHandlers) list(c echo.Context) error {
	q := c.QueryParams()
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	f := model.WebhookFilter{Limit: limit, After: after}
	if s := q.Get("eventType"); s != "" {
		if !h.v.model.Registrable(s) {
			return validationFailed("eventType", "unknown eventType %q; one of %v", s, h.v.model.EventTypes())
		}
		f.EventType = s
	}
	if s := q.Get("status"); s != "" {
		if !slices.Contains(h.v.model.Statuses(), s) {
			return validationFailed("status", "unknown status %q; one of %v", s, h.v.model.Statuses())
		}
		f.Status = s
	}
	page := f
	page.Limit++
	hooks, err := model.ListWebhooks(c.Request().Context(), h.db, h.scope(c), page)
	if err != nil {
		return err
	}
	hooks = trimPage(c, hooks, f.Limit, func(w *model.Webhook) int64 { return w.ID })
	data := make([]any, len(hooks))
	for i := range hooks {
		data[i] = h.v.present(&hooks[i], "")
	}
	return c.JSON(http.StatusOK, h.v.success(data, "Webhooks retrieved"))
}

func (h *deliveryHandlers) get(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h.v.success(h.v.present(w, ""), "Webhook retrieved"))
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
	if err := checkLimits(req.RateLimit, req.MaxInFlight); err != nil {
		return err
	}
	// Check existence before resolving the URL, so another account's id is 404 whatever the body.
	if _, err := model.GetWebhook(c.Request().Context(), h.db, h.scope(c), id); err != nil {
		return notFoundAsWebhook(err)
	}
	if err := h.checkURL(c, req.URL); err != nil {
		return err
	}
	w, err := model.UpdateWebhookURL(c.Request().Context(), h.db, h.scope(c), id, req.URL, limitsChange(req.RateLimit, req.MaxInFlight))
	if err != nil {
		return notFoundAsWebhook(err)
	}
	h.retime(c, id, req.RateLimit, req.MaxInFlight)
	return c.JSON(http.StatusOK, h.v.success(h.v.present(w, ""), "Webhook updated"))
}

// patch is PATCH <collection>/<id> {rateLimit?, maxInFlight?}: the webhook's own limits and nothing
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
	if err := checkLimits(req.RateLimit, req.MaxInFlight); err != nil {
		return err
	}
	w, err := model.UpdateWebhookLimits(c.Request().Context(), h.db, h.scope(c), id, limitsChange(req.RateLimit, req.MaxInFlight))
	if err != nil {
		return notFoundAsWebhook(err)
	}
	h.retime(c, id, req.RateLimit, req.MaxInFlight)
	return c.JSON(http.StatusOK, h.v.success(h.v.present(w, ""), "Webhook updated"))
}

// retime re-times the webhook's held attempts under limits that a request changed: a change
// applies from the next attempt on, and an attempt held back under the old limits is one
// (docs/api.md). It runs behind the answer: a webhook may have many deliveries under way, and a
// signal it cannot send only leaves an attempt to come back at the turn it was given.
func (h *deliveryHandlers) retime(c echo.Context, webhookID int64, rateLimit, maxInFlight nullableInt) {
	if (!rateLimit.Set && !maxInFlight.Set) || h.dispatcher == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), retimeTimeout)
	go func() {
		defer cancel()
		if n, err := h.dispatcher.Retime(ctx, h.db, webhookID); err != nil {
			h.log.Warn("re-time the held attempts of a webhook whose limits changed", "webhook", webhookID, "told", n, "err", err)
		}
	}()
}

func (h *deliveryHandlers) delete(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := model.DeleteWebhook(c.Request().Context(), h.db, h.scope(c), id); err != nil {
		return notFoundAsWebhook(err)
	}
	if err := dispatch.EndWebhookDeliveries(c.Request().Context(), h.db, h.dispatcher, id, dispatchTimeout); err != nil {
		h.log.Warn("end the deliveries of a deleted webhook", "webhook", id, "err", err)
	}
	return c.JSON(http.StatusOK, h.v.success(nil, "Webhook deleted"))
}

type secretResponse struct {
	Secret                  string   `json:"secret"`
	PreviousSecretExpiresAt *isoTime `json:"previousSecretExpiresAt,omitempty"`
}

func (h *deliveryHandlers) secret(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	plain, err := h.secrets.WebhookSecret(w)
	if err != nil {
		return err
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
	var secret, sealed string
	if req.Secret != nil {
		if err := model.CheckWebhookSecret(*req.Secret); err != nil {
			// The reason says what is wrong, never the value: it is a secret.
			return validationFailed("secret", "secret %v", err)
		}
		secret = *req.Secret
		if sealed, err = h.secrets.Seal(secret); err != nil {
			return err
		}
	} else if secret, sealed, err = h.secrets.NewSealedWebhookSecret(); err != nil {
		return err
	}
	until := model.Now().Add(secretOverlap)
	if err := model.RotateWebhookSecret(c.Request().Context(), h.db, h.scope(c), id, sealed, until); err != nil {
		var limit *model.RotationLimitError
		if errors.As(err, &limit) {
			return &apiError{status: http.StatusConflict, code: codeConflict, message: fmt.Sprintf(
				"the secret was rotated %d times within 24 hours and every previous secret still signs; rotate again after %s, when the oldest expires",
				model.MaxPreviousSecrets, limit.RetryAt.UTC().Format("2006-01-02T15:04:05.000Z"))}
		}
		return notFoundAsWebhook(err)
	}
	expires := isoTime(until)
	return c.JSON(http.StatusOK, h.v.success(secretResponse{Secret: secret, PreviousSecretExpiresAt: &expires}, "Webhook secret rotated; the previous secret keeps signing for 24 hours"))
}

// testEvent is the webhook.test event a variant B webhook receives after registration (spec 6.3).
func testEvent(w *model.Webhook) model.NewEvent { return model.WebhookTestEvent(w) }

// publishTest sends a fresh test event to a webhook.
func (h *deliveryHandlers) publishTest(c echo.Context, w *model.Webhook) (*model.PublishResult, error) {
	return h.publisher.Publish(c.Request().Context(), testEvent(w))
}

func (h *deliveryHandlers) load(c echo.Context) (*model.Webhook, error) {
	id, err := webhookID(c)
	if err != nil {
		return nil, err
	}
	w, err := model.GetWebhook(c.Request().Context(), h.db, h.scope(c), id)
	if err != nil {
		return nil, notFoundAsWebhook(err)
	}
	return w, nil
}

func (h *deliveryHandlers) checkEventType(eventType string) error {
	switch {
	case eventType == "":
		return validationFailed("eventType", "eventType is required")
	case eventType == model.EventTest && h.v.spec.TestEvent:
		return validationFailed("eventType", "eventType %s is sent by the service after registration and cannot be subscribed to", model.EventTest)
	case !h.v.model.Registrable(eventType):
		return validationFailed("eventType", "unknown eventType %q; one of %v", eventType, h.v.model.EventTypes())
	}
	return nil
}

func (h *deliveryHandlers) checkURL(c echo.Context, raw string) error {
	if raw == "" {
		return validationFailed("url", "url is required")
	}
	if err := h.policy.CheckURL(c.Request().Context(), raw, h.resolver); err != nil {
		var ue *egress.URLError
		if errors.As(err, &ue) {
			return validationFailed("url", "%s", ue.Reason)
		}
		return err
	}
	return nil
}
