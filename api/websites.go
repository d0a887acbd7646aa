package api

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/sources"
)

// websiteHandlers serves variant B's websites, whose lifecycle emits website events (spec 3.3).
type websiteHandlers struct {
	*Server
}

var slugPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$`)

type websiteJSON struct {
	ID          int64    `json:"id"`
	BrandID     int64    `json:"brandId"`
	Slug        string   `json:"slug"`
	URL         string   `json:"url"`
	Status      string   `json:"status"`
	ScheduledAt *isoTime `json:"scheduledAt"`
	PublishedAt *isoTime `json:"publishedAt"`
	ArchivedAt  *isoTime `json:"archivedAt"`
	CreatedAt   isoTime  `json:"createdAt"`
	UpdatedAt   isoTime  `json:"updatedAt"`
}

func (h *websiteHandlers) present(w *sources.Website) websiteJSON {
	return websiteJSON{ID: w.ID, BrandID: w.BrandID, Slug: w.Slug, URL: h.sources.SiteURL(w), Status: w.Status,
		ScheduledAt: optionalTime(w.ScheduledAt), PublishedAt: optionalTime(w.PublishedAt), ArchivedAt: optionalTime(w.ArchivedAt),
		CreatedAt: isoTime(w.CreatedAt), UpdatedAt: isoTime(w.UpdatedAt)}
}

func (h *websiteHandlers) create(c echo.Context) error {
	var req struct {
		BrandID *jsonInt `json:"brandId"`
		Slug    *string  `json:"slug"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.BrandID == nil || *req.BrandID < 1 {
		return validationFailed("brandId", "brandId is required and must be a positive integer")
	}
	if !input.SafeInteger(int64(*req.BrandID)) {
		return validationFailed("brandId", "brandId %s", input.UnsafeIntegerReason)
	}
	if req.Slug == nil || !slugPattern.MatchString(*req.Slug) {
		return validationFailed("slug", "slug is required: 1 to 64 lowercase letters, digits and inner hyphens")
	}
	w, err := h.sources.CreateWebsite(c.Request().Context(), accountOf(c).ID, int64(*req.BrandID), *req.Slug)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, variantB.success(h.present(w), "Website created"))
}

func (h *websiteHandlers) get(c echo.Context) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	w, err := h.sources.Website(c.Request().Context(), accountOf(c).ID, id)
	if err != nil {
		return notFoundAs(err, "website")
	}
	return c.JSON(http.StatusOK, variantB.success(h.present(w), "Website retrieved"))
}

func (h *websiteHandlers) list(c echo.Context) error {
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	ws, err := h.sources.Websites(c.Request().Context(), accountOf(c).ID, after, limit+1)
	if err != nil {
		return err
	}
	ws = trimPage(c, ws, limit, func(w *sources.Website) int64 { return w.ID })
	out := make([]websiteJSON, len(ws))
	for i := range ws {
		out[i] = h.present(&ws[i])
	}
	return c.JSON(http.StatusOK, variantB.success(out, "Websites retrieved"))
}

// publishWebsite publishes now (website.published with scheduledPublish false), or with a future
// scheduledAt schedules a durable Temporal timer that publishes then (sources.Service's
// ScheduleWebsite).
func (h *websiteHandlers) publishWebsite(c echo.Context) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	var req struct {
		ScheduledAt *string `json:"scheduledAt"`
	}
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	if req.ScheduledAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *req.ScheduledAt)
		if err != nil {
			return validationFailed("scheduledAt", "scheduledAt must be an ISO 8601 timestamp")
		}
		at = at.UTC().Truncate(time.Millisecond)
		if !input.TimeInRange(at) {
			return validationFailed("scheduledAt", "scheduledAt must be in the years 0001 to 9999 (UTC)")
		}
		w, err := h.sources.ScheduleWebsite(c.Request().Context(), accountOf(c).ID, id, at)
		if err != nil {
			return websiteError(err)
		}
		return c.JSON(http.StatusAccepted, variantB.success(h.present(w), "Website scheduled for publication"))
	}
	w, err := h.sources.PublishWebsite(c.Request().Context(), accountOf(c).ID, id)
	if err != nil {
		return websiteError(err)
	}
	return c.JSON(http.StatusOK, variantB.success(h.present(w), "Website published"))
}

func (h *websiteHandlers) archive(c echo.Context) error {
	if err := decodeNoBody(c); err != nil {
		return err
	}
	return h.retire(c, h.sources.ArchiveWebsite, "Website archived")
}

func (h *websiteHandlers) delete(c echo.Context) error {
	return h.retire(c, h.sources.DeleteWebsite, "Website deleted")
}

func (h *websiteHandlers) retire(c echo.Context, move func(ctx context.Context, accountID, id int64) (*sources.Website, error), message string) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	w, err := move(c.Request().Context(), accountOf(c).ID, id)
	if err != nil {
		return websiteError(err)
	}
	return c.JSON(http.StatusOK, variantB.success(h.present(w), message))
}

// websiteError words the refusals of a website's lifecycle and schedule.
func websiteError(err error) error {
	switch {
	case errors.Is(err, sources.ErrScheduleNotFuture):
		return validationFailed("scheduledAt", "scheduledAt must be in the future; omit it to publish now")
	case errors.Is(err, sources.ErrUnavailable):
		return errUnavailable
	case errors.Is(err, sources.ErrInvalidTransition):
		return conflict(err.Error())
	}
	return notFoundAs(err, "website")
}

func conflict(message string) *apiError {
	return &apiError{status: http.StatusConflict, code: codeConflict, message: message}
}
