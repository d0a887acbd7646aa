package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
)

// laneJSON is one lane of an ordered webhook (docs/ordering.md): key is the value at the webhook's
// ordering key that its events share (a string, number or boolean as the body has it; a string
// "sha256:<hex>" for a value too long to keep; null for the events whose body lacks one), and head
// the delivery it waits for, null when it waits for none.
type laneJSON struct {
	ID           int64           `json:"id"`
	Key          json.RawMessage `json:"key"`
	LastSequence int64           `json:"lastSequence"`
	DoneSequence int64           `json:"doneSequence"`
	Blocked      bool            `json:"blocked"`
	Waiting      int64           `json:"waiting"`
	Head         *laneHeadJSON   `json:"head"`
}

type laneHeadJSON struct {
	DeliveryID    int64    `json:"deliveryId"`
	EventID       int64    `json:"eventId"`
	Sequence      int64    `json:"sequence"`
	Status        string   `json:"status"`
	Attempts      int      `json:"attempts"`
	LastError     *string  `json:"lastError"`
	NextAttemptAt *isoTime `json:"nextAttemptAt"`
}

func newLaneJSON(v *model.LaneView) laneJSON {
	out := laneJSON{ID: v.ID, Key: laneKeyJSON(v.Key), LastSequence: v.LastSeq, DoneSequence: v.DoneSeq, Blocked: v.Blocked(), Waiting: v.Waiting}
	if hd := v.Head; hd != nil {
		out.Head = &laneHeadJSON{DeliveryID: hd.DeliveryID, EventID: hd.EventID, Sequence: hd.Seq, Status: hd.State, Attempts: hd.Attempts,
			LastError: hd.LastError, NextAttemptAt: optionalTime(hd.NextAttemptAt)}
	}
	return out
}

// laneKeyJSON is a lane's key as the API shows it: the stored JSON text of the value, a hashed
// long value as a string, null for the lane of the events without one.
func laneKeyJSON(key string) json.RawMessage {
	switch {
	case key == model.NoLaneKey:
		return json.RawMessage("null")
	case strings.HasPrefix(key, model.HashedKeyPrefix):
		b, _ := json.Marshal(key)
		return b
	}
	return json.RawMessage(key)
}

// lanes is GET <collection>/<id>/lanes: the webhook's lanes that wait for a delivery, by id, each
// with its head; ?blocked=true only those whose head ran out of its schedule. ?after=<lane id>
// pages on.
func (h *deliveryHandlers) lanes(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	limit, after, err := pageParams(c)
	if err != nil {
		return err
	}
	blocked, err := boolParam(c, "blocked")
	if err != nil {
		return err
	}
	lanes, err := h.webhooks.Lanes(c.Request().Context(), w, model.LaneFilter{Blocked: blocked, After: after, Limit: limit + 1})
	if err != nil {
		return err
	}
	lanes = trimPage(c, lanes, limit, func(v *model.LaneView) int64 { return v.ID })
	return writeList(c, h, lanes, func(v *model.LaneView) any { return newLaneJSON(v) }, "Lanes retrieved")
}

// lane is GET <collection>/<id>/lanes/<laneId>: one lane with its head.
func (h *deliveryHandlers) lane(c echo.Context) error {
	w, laneID, err := h.loadLane(c)
	if err != nil {
		return err
	}
	v, err := h.webhooks.Lane(c.Request().Context(), w, laneID)
	if err != nil {
		return notFoundAs(err, "lane")
	}
	return c.JSON(http.StatusOK, h.v.success(newLaneJSON(v), "Lane retrieved"))
}

// retryLane is POST <collection>/<id>/lanes/<laneId>/retry: the lane's head is sent again now, as
// a resend of its delivery is; a blocked lane goes on once it is delivered.
func (h *deliveryHandlers) retryLane(c echo.Context) error {
	w, laneID, err := h.loadLane(c)
	if err != nil {
		return err
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	v, err := h.webhooks.RetryLane(c.Request().Context(), w, laneID, arrivedAt(c))
	if err != nil {
		return notFoundAs(err, "lane")
	}
	return c.JSON(http.StatusAccepted, h.v.success(newLaneJSON(v), "Lane's head queued to be sent again"))
}

// skipLane is POST <collection>/<id>/lanes/<laneId>/skip: the lane's head is given up (canceled),
// and the lane goes on with the delivery behind it. ?head=<deliveryId> skips only that delivery:
// a lane that has passed it is 409, so that a request made twice skips one event, not two.
func (h *deliveryHandlers) skipLane(c echo.Context) error {
	w, laneID, err := h.loadLane(c)
	if err != nil {
		return err
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	var head int64
	if q := c.QueryParam("head"); q != "" {
		var ok bool
		if head, ok = parseID(q); !ok || head < 1 {
			return invalidField("head", "head must be a delivery id, a positive integer")
		}
	}
	v, err := h.webhooks.SkipLane(c.Request().Context(), w, laneID, head)
	if err != nil {
		return notFoundAs(err, "lane")
	}
	return c.JSON(http.StatusOK, h.v.success(newLaneJSON(v), "Lane's head skipped"))
}

// loadLane reads the webhook and the lane id of a .../lanes/:laneId path.
func (h *deliveryHandlers) loadLane(c echo.Context) (*model.Webhook, int64, error) {
	w, err := h.load(c)
	if err != nil {
		return nil, 0, err
	}
	id, ok := parseID(c.Param("laneId"))
	if !ok || id < 1 {
		return nil, 0, invalidField("laneId", "lane id must be a positive integer")
	}
	return w, id, nil
}
