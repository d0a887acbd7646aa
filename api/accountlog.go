package api

import (
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// logDeliveryJSON is a delivery as GET <prefix>/deliveries lists it: a webhook's delivery log's
// shape, and the webhook it belongs to.
type logDeliveryJSON struct {
	deliveryJSON
	WebhookID int64 `json:"webhookId"`
}

// listParam reads a query parameter that lists values, comma-separated (a parameter is given once:
// singleParameters); nil when absent. An empty item ("a,,b") is 400 naming it.
func listParam(c echo.Context, name string) ([]string, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	items := strings.Split(s, ",")
	for _, item := range items {
		if item == "" {
			return nil, invalidField(name, "%s is a comma-separated list without empty items", name)
		}
	}
	return items, nil
}

// idsParam reads a comma-separated list of positive integer ids.
func idsParam(c echo.Context, name string) ([]int64, error) {
	items, err := listParam(c, name)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, item := range items {
		id, ok := parseID(item)
		if !ok || id < 1 {
			return nil, invalidField(name, "%s must list positive integer ids, comma-separated", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// accountDeliveries is GET <prefix>/deliveries: the account's deliveries across its webhooks of the
// variant, newest first, each with its attempt log and its webhook's id, kept by state, eventType,
// webhookId and statusClass (each a comma-separated list), since and until; ?before=<delivery id>
// pages back, and a page ends early once its attempt logs carry MaxPageBytes.
func (h *deliveryHandlers) accountDeliveries(c echo.Context) error {
	limit, before, err := backPageParams(c, "delivery")
	if err != nil {
		return err
	}
	var sel webhooks.Selection
	if sel.States, err = listParam(c, "state"); err != nil {
		return err
	}
	if sel.EventTypes, err = listParam(c, "eventType"); err != nil {
		return err
	}
	if sel.StatusClasses, err = listParam(c, "statusClass"); err != nil {
		return err
	}
	if sel.WebhookIDs, err = idsParam(c, "webhookId"); err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &sel.Since}, {"until", &sel.Until}} {
		at, err := timeParam(c, t.name)
		if err != nil {
			return err
		}
		if at != nil {
			*t.to = *at
		}
	}
	page, err := h.webhooks.DeliveryLog(c.Request().Context(), h.scope(c), sel, before, limit, MaxPageBytes, model.IncludeAttempts)
	if err != nil {
		return err
	}
	if page.More {
		setNextLink(c, limit, "before", page.Last)
	}
	return writeList(c, h, page.Views, func(v *model.DeliveryView) any {
		return logDeliveryJSON{deliveryJSON: newDeliveryJSON(v), WebhookID: v.WebhookID}
	}, "Deliveries retrieved")
}
