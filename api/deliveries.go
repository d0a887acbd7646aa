package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

type attemptJSON struct {
	Attempt      int     `json:"attempt"`
	URL          string  `json:"url"`
	StartedAt    isoTime `json:"startedAt"`
	StatusCode   *int    `json:"statusCode"`
	ErrorClass   *string `json:"errorClass"`
	Error        *string `json:"error"`
	LatencyMS    int64   `json:"latencyMs"`
	ResponseBody *string `json:"responseBody"`
}

type deliveryJSON struct {
	ID            int64         `json:"id"`
	EventID       int64         `json:"eventId"`
	EventType     string        `json:"eventType"`
	State         string        `json:"state"`
	Attempts      int           `json:"attempts"`
	NextAttemptAt *isoTime      `json:"nextAttemptAt"`
	LastError     *string       `json:"lastError"`
	CreatedAt     isoTime       `json:"createdAt"`
	UpdatedAt     isoTime       `json:"updatedAt"`
	AttemptLog    []attemptJSON `json:"attemptLog"`
}

// deliveries is GET <collection>/<id>/deliveries: the webhook's deliveries, newest first, each
// with its attempt log. ?before=<delivery id> pages back.
func (h *webhookHandlers) deliveries(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	var before int64
	if s := c.QueryParam("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return invalidField("before", "before must be a positive integer delivery id")
		}
		before = n
	}
	views, err := model.ListDeliveries(c.Request().Context(), h.db, w.ID, before, limit+1)
	if err != nil {
		return err
	}
	if int64(len(views)) > limit {
		views = views[:limit]
		c.Response().Header().Set("Link", fmt.Sprintf(`<%s?limit=%d&before=%d>; rel="next"`, c.Request().URL.Path, limit, views[len(views)-1].ID))
	}
	out := make([]deliveryJSON, len(views))
	for i, v := range views {
		d := deliveryJSON{
			ID: v.ID, EventID: v.EventID, EventType: v.EventType, State: v.State, Attempts: v.Attempts,
			LastError: v.LastError, CreatedAt: isoTime(v.CreatedAt), UpdatedAt: isoTime(v.UpdatedAt), AttemptLog: []attemptJSON{},
		}
		d.NextAttemptAt = optionalTime(v.NextAttemptAt)
		for _, a := range v.Log {
			d.AttemptLog = append(d.AttemptLog, attemptJSON{
				Attempt: a.Attempt, URL: a.URL, StartedAt: isoTime(a.StartedAt), StatusCode: a.StatusCode,
				ErrorClass: a.ErrorClass, Error: a.Error, LatencyMS: a.LatencyMS, ResponseBody: a.ResponseBody,
			})
		}
		out[i] = d
	}
	return c.JSON(http.StatusOK, h.v.success(out, "Deliveries retrieved"))
}

// retry is POST <collection>/<id>/retry: the webhook is enabled if it was disabled, every exhausted
// delivery of it runs its schedule again, and a variant B webhook gets a fresh test event.
func (h *webhookHandlers) retry(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if h.starter == nil {
		return errUnavailable
	}
	// Enabled before the signals: a retried attempt that still found the webhook disabled would
	// be held again instead of delivered.
	if err := model.ReenableWebhook(ctx, h.db, w.ID); err != nil {
		return err
	}
	refs, err := model.ExhaustedDeliveries(ctx, h.db, w.ID)
	if err != nil {
		return err
	}
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.DeliveryID
	}
	attempts, err := model.DeliveryAttempts(ctx, h.db, ids)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, dispatchTimeout)
	defer cancel()
	// Signaled when its workflow still waits in the retry window, a new run when it has ended.
	signaled, err := h.starter.Retry(tctx, refs, attempts)
	if err != nil {
		h.log.Warn("retry", "webhook", w.ID, "retried", len(signaled), "of", len(refs), "err", err)
		if len(signaled) == 0 {
			return errUnavailable
		}
	}
	if err := model.ClaimForRetry(ctx, h.db, signaled); err != nil {
		return err
	}
	body := map[string]any{"retried": len(signaled)}
	if h.v.model == model.VariantB {
		res, err := h.publishTest(c, w)
		if err != nil {
			return err
		}
		body["testEventId"] = res.Event.ID
	}
	return c.JSON(http.StatusAccepted, h.v.success(body, fmt.Sprintf("Retrying %d delivery(ies)", len(signaled))))
}

func optionalTime(t *time.Time) *isoTime {
	if t == nil {
		return nil
	}
	v := isoTime(*t)
	return &v
}
