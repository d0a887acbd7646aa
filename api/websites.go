package api

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
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
	return websiteJSON{ID: w.ID, BrandID: w.BrandID, Slug: w.Slug, URL: w.URL(h.siteBaseURL), Status: w.Status,
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
	if !model.SafeInteger(int64(*req.BrandID)) {
		return validationFailed("brandId", "brandId %s", model.UnsafeIntegerReason)
	}
	if req.Slug == nil || !slugPattern.MatchString(*req.Slug) {
		return validationFailed("slug", "slug is required: 1 to 64 lowercase letters, digits and inner hyphens")
	}
	now := model.Now()
	w := &sources.Website{AccountID: accountOf(c).ID, BrandID: int64(*req.BrandID), Slug: *req.Slug, Status: sources.WebsiteDraft, CreatedAt: now, UpdatedAt: now}
	if err := sources.InsertWebsite(c.Request().Context(), h.db, w); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, variantB.success(h.present(w), "Website created"))
}

func (h *websiteHandlers) get(c echo.Context) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	w, err := sources.GetWebsite(c.Request().Context(), h.db, accountOf(c).ID, id, false)
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
	ws, err := sources.ListWebsites(c.Request().Context(), h.db, accountOf(c).ID, after, limit+1)
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
// scheduledAt schedules a durable Temporal timer that publishes then.
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
		if !model.TimeInRange(at) {
			return validationFailed("scheduledAt", "scheduledAt must be in the years 0001 to 9999 (UTC)")
		}
		if !at.After(time.Now()) {
			return validationFailed("scheduledAt", "scheduledAt must be in the future; omit it to publish now")
		}
		if h.dispatcher == nil {
			return errUnavailable
		}
		w, err := h.schedule(c, id, at)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusAccepted, variantB.success(h.present(w), "Website scheduled for publication"))
	}
	w, err := h.transition(c, id, func(w *sources.Website) (*model.NewEvent, error) { return w.Publish(h.siteBaseURL, false) })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, variantB.success(h.present(w), "Website published"))
}

// schedule saves a website's scheduled time, then starts its timer. No transaction stays open
// across the call to Temporal: on SQLite that would hold the one write lock of every account for
// as long as Temporal takes to answer.
//
// The row is the truth and the timer follows it: a timer that fires for a time the row no longer
// holds publishes nothing. When the timer cannot be started the schedule is put back as it was
// (compare-and-set, so a later change is kept) and the client gets 503 with nothing changed.
func (h *websiteHandlers) schedule(c echo.Context, id int64, at time.Time) (*sources.Website, error) {
	ctx := c.Request().Context()
	var w *sources.Website
	var prev *time.Time
	var prevUpdatedAt time.Time
	err := h.webhooks.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		if w, err = sources.GetWebsite(ctx, cs.Tx, accountOf(c).ID, id, true); err != nil {
			return err
		}
		if w.Status != sources.WebsiteDraft {
			return conflict("a " + w.Status + " website cannot be scheduled for publication")
		}
		prev, prevUpdatedAt, w.ScheduledAt = w.ScheduledAt, w.UpdatedAt, &at
		return sources.SaveWebsite(ctx, cs.Tx, w)
	})
	if err != nil {
		return nil, notFoundAs(err, "website")
	}
	// Two schedules of one website can commit in one order and reach Temporal in the other,
	// leaving the timer on the older time. So after starting a timer, read the row again and
	// follow it until the timer started last is for the time the row holds.
	want := at
	for i := range 3 {
		tctx, cancel := context.WithTimeout(ctx, h.webhooks.RequestTimeout())
		err := h.dispatcher.SchedulePublish(tctx, w.ID, want)
		cancel()
		if err != nil && i > 0 {
			// Only following another request's schedule failed; that request answers for it.
			h.log.Warn("follow a newer schedule", "website", w.ID, "request_id", requestID(c), "err", err)
			return w, nil
		}
		if err != nil {
			h.log.Warn("schedule publication", "website", w.ID, "request_id", requestID(c), "err", err)
			// Undone without the request's cancellation: the client may be gone, and the row must
			// not keep promising a publication that no timer will make.
			restored, uerr := sources.UnscheduleWebsite(context.WithoutCancel(ctx), h.db, w.ID, at, prev, prevUpdatedAt)
			if uerr != nil {
				h.log.Error("undo schedule after Temporal refused", "website", w.ID, "request_id", requestID(c), "err", uerr)
			} else if !restored {
				h.log.Info("schedule changed again before it could be undone", "website", w.ID, "request_id", requestID(c))
			}
			return nil, errUnavailable
		}
		cur, err := sources.GetWebsite(ctx, h.db, accountOf(c).ID, id, false)
		if err != nil || cur.Status != sources.WebsiteDraft || cur.ScheduledAt == nil || cur.ScheduledAt.Equal(want) {
			// Current, or published, archived or deleted since: a leftover timer then finds the
			// schedule gone and publishes nothing.
			return w, nil
		}
		want = *cur.ScheduledAt
	}
	return w, nil
}

func (h *websiteHandlers) archive(c echo.Context) error {
	if err := decodeNoBody(c); err != nil {
		return err
	}
	return h.retire(c, sources.WebsiteArchived, "Website archived")
}

func (h *websiteHandlers) delete(c echo.Context) error {
	return h.retire(c, sources.WebsiteDeleted, "Website deleted")
}

func (h *websiteHandlers) retire(c echo.Context, to, message string) error {
	id, err := pathID(c, "website")
	if err != nil {
		return err
	}
	w, err := h.transition(c, id, func(w *sources.Website) (*model.NewEvent, error) { return w.Archive(to) })
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, variantB.success(h.present(w), message))
}

// transition applies a lifecycle move with its event in one change, then cancels a scheduled
// publication if there was one.
func (h *websiteHandlers) transition(c echo.Context, id int64, move func(*sources.Website) (*model.NewEvent, error)) (*sources.Website, error) {
	ctx := c.Request().Context()
	var w *sources.Website
	hadSchedule := false
	err := h.webhooks.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		w, hadSchedule, err = sources.MoveWebsite(ctx, cs, accountOf(c).ID, id, move)
		return err
	})
	if errors.Is(err, sources.ErrInvalidTransition) {
		return nil, conflict(err.Error())
	}
	if err != nil {
		return nil, notFoundAs(err, "website")
	}
	if hadSchedule && h.dispatcher != nil {
		// Best effort: a timer that fires anyway finds the schedule gone and publishes nothing.
		tctx, cancel := context.WithTimeout(ctx, h.webhooks.RequestTimeout())
		defer cancel()
		if err := h.dispatcher.CancelPublish(tctx, w.ID); err != nil {
			h.log.Warn("cancel scheduled publication", "website", w.ID, "err", err)
		}
	}
	return w, nil
}

func conflict(message string) *apiError {
	return &apiError{status: http.StatusConflict, code: codeConflict, message: message}
}
