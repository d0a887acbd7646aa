package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// Fan intake: the website platform's backend reports leads, pre-saves and analytics for a
// website; each emits its event (and counts toward analytics thresholds) in one transaction.

// lead is POST /websites/<id>/leads: emits lead.captured at once.
func (h *websiteHandlers) lead(c echo.Context) error {
	var req sources.Lead
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := req.Normalize(); err != nil {
		return dataFieldError(err)
	}
	return h.fanEvent(c, "lead.captured", func(w *sources.Website) any {
		return sources.LeadCaptured{WebsiteID: w.ID, BrandID: w.BrandID, Lead: req}
	})
}

// presave is POST /websites/<id>/presaves: emits presave.completed.
func (h *websiteHandlers) presave(c echo.Context) error {
	var req sources.Presave
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	return h.fanEvent(c, "presave.completed", func(w *sources.Website) any {
		return sources.PresaveCompleted{WebsiteID: w.ID, BrandID: w.BrandID, Presave: req}
	})
}

// fanEvent validates the event data built from a website, then stores the event with a signup
// counted (and any threshold that crossed) in one transaction.
func (h *websiteHandlers) fanEvent(c echo.Context, eventType string, build func(*sources.Website) any) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	var first *model.PublishResult
	err = h.webhooks.Change(c.Request().Context(), func(ctx context.Context, cs *model.ChangeSet) error {
		w, err := sources.GetWebsite(ctx, cs.Tx, accountOf(c).ID, id, true)
		if err != nil {
			return err
		}
		if w.Status != sources.WebsitePublished {
			return conflict("the website is " + w.Status + "; fans reach published websites only")
		}
		raw, err := json.Marshal(build(w))
		if err != nil {
			return err
		}
		data, err := wire.CanonicalJSON(raw)
		if err != nil {
			return err
		}
		if err := sources.ValidateEventData(eventType, raw); err != nil {
			return dataFieldError(err)
		}
		if first, err = cs.Emit(ctx, model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: eventType, Data: string(data)}); err != nil {
			return err
		}
		_, err = count(ctx, cs, w, sources.MetricSignups, 1)
		return err
	})
	if err != nil {
		return notFoundAs(err, "website")
	}
	// The same shape as POST <prefix>/events answers: one intake reply everywhere.
	return c.JSON(http.StatusAccepted, variantB.success(map[string]any{"id": first.Event.ID, variantB.spec.TypeField: first.Event.EventType, "matched": first.Event.Matched}, "Event accepted"))
}

// analytics is POST /websites/<id>/analytics {metric, increment}.
func (h *websiteHandlers) analytics(c echo.Context) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	var req struct {
		Metric    string   `json:"metric"`
		Increment *jsonInt `json:"increment"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case req.Metric == sources.MetricSignups:
		return validationFailed("metric", "signups are counted by webhookd from leads and pre-saves")
	case !slices.Contains(sources.CountedMetrics, req.Metric):
		return validationFailed("metric", "metric must be one of %s", strings.Join(sources.CountedMetrics, ", "))
	case req.Increment == nil || *req.Increment < 1 || *req.Increment > 1_000_000:
		return validationFailed("increment", "increment must be an integer from 1 to 1000000")
	}
	var value int64
	err = h.webhooks.Change(c.Request().Context(), func(ctx context.Context, cs *model.ChangeSet) error {
		w, err := sources.GetWebsite(ctx, cs.Tx, accountOf(c).ID, id, true)
		if err != nil {
			return err
		}
		value, err = count(ctx, cs, w, req.Metric, int64(*req.Increment))
		return err
	})
	if err != nil {
		return notFoundAs(err, "website")
	}
	return c.JSON(http.StatusOK, variantB.success(map[string]any{"metric": req.Metric, "value": value}, "Counted"))
}

// count adds to a counter and emits the threshold events it causes, in the change.
func count(ctx context.Context, cs *model.ChangeSet, w *sources.Website, metric string, n int64) (int64, error) {
	value, evs, err := sources.AddToCounter(ctx, cs.Tx, w, metric, n)
	if err != nil {
		return 0, err
	}
	for _, ev := range evs {
		if _, err := cs.Emit(ctx, ev); err != nil {
			return 0, err
		}
	}
	return value, nil
}

// dataFieldError answers a *model.DataError about a fan's event as a failed validation of the
// request's field: the request is the event's data without the website's ids.
func dataFieldError(err error) error {
	var de *model.DataError
	if errors.As(err, &de) {
		field := strings.TrimPrefix(de.Field, "data.")
		return validationFailed(field, "%s %s", field, de.Reason)
	}
	return err
}
