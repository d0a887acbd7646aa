package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// disable is POST <collection>/<id>/disable: the webhook gets no further attempts until it is
// enabled; its new events are kept for a manual retry. Disabling a disabled webhook keeps the
// first disabled_at. The notice webhook.disabled says the API did it.
func (h *deliveryHandlers) disable(c echo.Context) error {
	return h.toggle(c, h.webhooks.Disable, "Webhook disabled")
}

// enable is POST <collection>/<id>/enable: a fresh start for the webhook (variant B's status is
// active again, the next exhaustion alerts again). Nothing is replayed and no test event is sent:
// POST <collection>/<id>/retry does that.
func (h *deliveryHandlers) enable(c echo.Context) error {
	return h.toggle(c, h.webhooks.Enable, "Webhook enabled")
}

func (h *deliveryHandlers) toggle(c echo.Context, change func(context.Context, model.WebhookScope, int64, string) (*model.Webhook, error), message string) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	w, err := change(c.Request().Context(), h.scope(c), id, model.ActorAPI)
	if err != nil {
		return notFoundAsWebhook(err)
	}
	return h.show(c, http.StatusOK, w, "", message)
}
