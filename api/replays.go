package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// replayRequest is POST <prefix>/replays's body.
type replayRequest struct {
	Since         *string         `json:"since"`
	Until         *string         `json:"until"`
	EventTypes    []string        `json:"eventTypes"`
	WebhookIDs    []int64         `json:"webhookIds"`
	States        []string        `json:"states"`
	StatusClasses []string        `json:"statusClasses"`
	Filter        json.RawMessage `json:"filter"`
	DryRun        bool            `json:"dryRun"`
}

// replayJSON is a replay as the API shows it: its counts and the criteria it was created with.
type replayJSON struct {
	ID            int64           `json:"id"`
	State         string          `json:"state"`
	Matched       int64           `json:"matched"`
	Sent          int64           `json:"sent"`
	Skipped       int64           `json:"skipped"`
	Remaining     int64           `json:"remaining"`
	Since         isoTime         `json:"since"`
	Until         isoTime         `json:"until"`
	EventTypes    []string        `json:"eventTypes"`
	WebhookIDs    []int64         `json:"webhookIds"`
	States        []string        `json:"states"`
	StatusClasses []string        `json:"statusClasses"`
	Filter        json.RawMessage `json:"filter"`
	CreatedAt     isoTime         `json:"createdAt"`
	FinishedAt    *isoTime        `json:"finishedAt"`
}

// replayPlanJSON is a dry run's answer.
type replayPlanJSON struct {
	DryRun   bool    `json:"dryRun"`
	Matched  int     `json:"matched"`
	FirstIDs []int64 `json:"firstIds"`
}

func newReplayJSON(r *model.Replay) (replayJSON, error) {
	c, err := r.ReadCriteria()
	if err != nil {
		return replayJSON{}, err
	}
	out := replayJSON{ID: r.ID, State: r.State, Matched: r.Matched, Sent: r.Sent, Skipped: r.Skipped, Remaining: r.Remaining(),
		Since: isoTime(c.Since), Until: isoTime(c.Until), EventTypes: nonNil(c.EventTypes), WebhookIDs: nonNil(c.WebhookIDs),
		States: nonNil(c.States), StatusClasses: nonNil(c.StatusClasses), Filter: c.Filter, CreatedAt: isoTime(r.CreatedAt),
		FinishedAt: optionalTime(r.FinishedAt)}
	if len(out.Filter) == 0 {
		out.Filter = json.RawMessage("null")
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// replay is POST <prefix>/replays: a dry run answers what it matches (200); a real one creates the
// replay, starts its workflow and answers it at once (202).
func (h *deliveryHandlers) replay(c echo.Context) error {
	var req replayRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Since == nil {
		return validationFailed("since", "since is required")
	}
	ask := webhooks.ReplayAsk{EventTypes: req.EventTypes, WebhookIDs: req.WebhookIDs, States: req.States, StatusClasses: req.StatusClasses, Filter: req.Filter}
	var err error
	if ask.Since, err = parseTime("since", *req.Since); err != nil {
		return err
	}
	if req.Until != nil {
		until, err := parseTime("until", *req.Until)
		if err != nil {
			return err
		}
		ask.Until = &until
	}
	if req.DryRun {
		plan, err := h.webhooks.PlanReplay(c.Request().Context(), h.scope(c), ask)
		if err != nil {
			return err
		}
		out := replayPlanJSON{DryRun: true, Matched: plan.Matched, FirstIDs: plan.FirstIDs}
		return c.JSON(http.StatusOK, h.v.success(out, fmt.Sprintf("The replay would send %d delivery(ies)", plan.Matched)))
	}
	r, err := h.webhooks.Replay(c.Request().Context(), h.scope(c), ask)
	if err != nil {
		return err
	}
	return h.showReplay(c, http.StatusAccepted, r, fmt.Sprintf("Replaying %d delivery(ies)", r.Matched))
}

// getReplay is GET <prefix>/replays/<id>: the replay's counts.
func (h *deliveryHandlers) getReplay(c echo.Context) error {
	id, err := pathID(c, "replay")
	if err != nil {
		return err
	}
	r, err := h.webhooks.GetReplay(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAs(err, "replay")
	}
	return h.showReplay(c, http.StatusOK, r, "Replay retrieved")
}

// cancelReplay is DELETE <prefix>/replays/<id>: what the replay has not sent is not sent; its
// counts stay. A replay that has ended is answered as it is.
func (h *deliveryHandlers) cancelReplay(c echo.Context) error {
	id, err := pathID(c, "replay")
	if err != nil {
		return err
	}
	r, err := h.webhooks.CancelReplay(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAs(err, "replay")
	}
	return h.showReplay(c, http.StatusOK, r, "Replay canceled")
}

func (h *deliveryHandlers) showReplay(c echo.Context, status int, r *model.Replay, message string) error {
	out, err := newReplayJSON(r)
	if err != nil {
		return err
	}
	return c.JSON(status, h.v.success(out, message))
}
