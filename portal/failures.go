package portal

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// failureStates are the deliveries the failures page lists: exhausted ones, and those that failed
// an attempt and wait for the next (retrying).
var failureStates = []string{model.DeliveryRetrying, model.DeliveryExhausted}

// failuresLimit is how many deliveries a page of failures shows.
const failuresLimit = 50

// failures is GET /portal/failures: the session's failed deliveries across its endpoints, newest
// first, in pages that follow one another by id (?before=), each linking to its delivery's page.
// It reads the delivery log across webhooks (webhooks.Service.DeliveryLog), as GET
// <prefix>/deliveries?state=retrying,exhausted does.
func (h *eventHandlers) failures(c echo.Context) error {
	session := sessionOf(c)
	data := map[string]any{"Title": "Failures"}
	var before int64
	if s := c.QueryParam("before"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			data["FormError"] = "The page cursor is not valid; start again from the first page."
			return h.render(c, http.StatusBadRequest, "failures", data)
		}
		before = id
	}
	page, err := h.webhooks.DeliveryLog(c.Request().Context(), session.Scope(), webhooks.Selection{States: failureStates}, before, failuresLimit, 0, 0)
	if err != nil {
		return err
	}
	data["Deliveries"] = page.Views
	data["First"] = before == 0
	if page.More {
		data["Next"] = "/portal/failures?before=" + strconv.FormatInt(page.Last, 10)
	}
	return h.render(c, http.StatusOK, "failures", data)
}
