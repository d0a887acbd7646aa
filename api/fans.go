package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// Fan intake: the website platform's backend reports leads, pre-saves and analytics for a
// website; each emits its event (and counts toward analytics thresholds) in one transaction.

// lead is POST /websites/<id>/leads: emits lead.captured at once.
func (h *websiteHandlers) lead(c echo.Context) error {
	var req sources.Lead
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	res, err := h.sources.CaptureLead(c.Request().Context(), accountOf(c).ID, id, req)
	return h.fanAnswer(c, res, err)
}

// presave is POST /websites/<id>/presaves: emits presave.completed.
func (h *websiteHandlers) presave(c echo.Context) error {
	var req sources.Presave
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	res, err := h.sources.CompletePresave(c.Request().Context(), accountOf(c).ID, id, req)
	return h.fanAnswer(c, res, err)
}

// fanAnswer answers a fan's event: the event stored with a signup counted (and any threshold
// that crossed) in one transaction, or the refusal.
func (h *websiteHandlers) fanAnswer(c echo.Context, first *model.PublishResult, err error) error {
	var notPublished *sources.NotPublishedError
	switch {
	case errors.As(err, &notPublished):
		return conflict(notPublished.Error())
	case err != nil:
		return notFoundAs(dataFieldError(err), "website")
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
	case req.Increment == nil || *req.Increment < 1 || *req.Increment > sources.MaxIncrement:
		return validationFailed("increment", "increment must be an integer from 1 to %d", sources.MaxIncrement)
	}
	value, err := h.sources.CountVisit(c.Request().Context(), accountOf(c).ID, id, req.Metric, int64(*req.Increment))
	if err != nil {
		return notFoundAs(err, "website")
	}
	return c.JSON(http.StatusOK, variantB.success(map[string]any{"metric": req.Metric, "value": value}, "Counted"))
}

// dataFieldError answers a *input.DataError about a fan's event as a failed validation of the
// request's field: the request is the event's data without the website's ids.
func dataFieldError(err error) error {
	var de *input.DataError
	if errors.As(err, &de) {
		field := strings.TrimPrefix(de.Field, "data.")
		return validationFailed(field, "%s %s", field, de.Reason)
	}
	return err
}
