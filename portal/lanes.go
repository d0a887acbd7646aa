package portal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// shownLanes bounds the blocked lanes the endpoint page lists; the API lists them all, a page at a
// time (GET <collection>/<id>/lanes?blocked=true).
const shownLanes = 50

// blockedLanes is what the endpoint page shows of an ordered endpoint's blocked lanes: at most
// shownLanes of them, More when there are others.
type blockedLanes struct {
	Lanes []shownLane
	More  bool
}

// shownLane is one blocked lane as the page lists it: Key is the stored JSON text of the value its
// events share ("" for the events without one), Head the delivery it waits for.
type shownLane struct {
	ID   int64
	Key  string
	Head model.LaneHead
}

// blocked reads w's blocked lanes for its page; nil when w is not ordered and has none (its lanes
// keep the events they held when its ordering was removed, and may still block on them).
func (h *endpointHandlers) blocked(c echo.Context, w *model.Webhook) (*blockedLanes, error) {
	views, err := h.webhooks.Lanes(c.Request().Context(), w, model.LaneFilter{Blocked: true, Limit: shownLanes + 1})
	if err != nil {
		return nil, err
	}
	if w.OrderingKey == nil && len(views) == 0 {
		return nil, nil
	}
	out := &blockedLanes{Lanes: []shownLane{}, More: len(views) > shownLanes}
	for _, v := range views[:min(len(views), shownLanes)] {
		if v.Head != nil {
			out.Lanes = append(out.Lanes, shownLane{ID: v.ID, Key: v.Key, Head: *v.Head})
		}
	}
	return out, nil
}

// ordering is POST <collection>/<id>/ordering: do=save orders the endpoint's deliveries by the
// form's key (as PATCH {"ordering": {"key": ...}}), do=remove stops ordering them (as PATCH
// {"ordering": null}). A refused key is shown as sent, with the use case's reason.
func (h *endpointHandlers) ordering(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	key := strings.TrimSpace(c.FormValue("key"))
	edit := webhooks.OrderingEdit{Set: true}
	switch c.FormValue("do") {
	case "save":
		if edit.JSON, err = json.Marshal(map[string]string{"key": key}); err != nil {
			return err
		}
	case "remove":
	default:
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Save or remove the ordering key with the form's buttons."}
	}
	return h.change(c, w, webhooks.Settings{Ordering: edit},
		func(reason string) detailView {
			return detailView{orderingText: &key, orderingError: "The ordering key cannot be used: " + reason + ". Nothing was changed."}
		},
		func(saved *model.Webhook) detailView {
			if saved.OrderingKey == nil {
				return detailView{orderingNotice: "Ordering was removed: the events accepted from now on are delivered in no promised order."}
			}
			return detailView{orderingNotice: fmt.Sprintf("The events accepted from now on are delivered in order per value of %s.", *saved.OrderingKey)}
		})
}

// retryLane is POST <collection>/<id>/lanes/<laneId>/retry: the blocked lane's head is sent again
// now, as the API's POST .../lanes/<laneId>/retry does.
func (h *endpointHandlers) retryLane(c echo.Context) error {
	asked := model.Now()
	return h.laneAction(c, func(w *model.Webhook, laneID int64) (string, error) {
		_, err := h.webhooks.RetryLane(c.Request().Context(), w, laneID, asked)
		return "The head of the lane is being sent again; the lane goes on once it is delivered.", err
	})
}

// skipLane is POST <collection>/<id>/lanes/<laneId>/skip: the blocked lane's head is given up, and
// the lane goes on with the event behind it, as the API's POST .../lanes/<laneId>/skip does.
func (h *endpointHandlers) skipLane(c echo.Context) error {
	return h.laneAction(c, func(w *model.Webhook, laneID int64) (string, error) {
		// The head the page showed: a form posted again (a reload) skips nothing more.
		head, perr := strconv.ParseInt(c.FormValue("head"), 10, 64)
		if perr != nil || head < 1 {
			return "", errFormHead
		}
		_, err := h.webhooks.SkipLane(c.Request().Context(), w, laneID, head)
		return "The head of the lane was skipped: it will not be sent by the lane, which goes on with the event behind it.", err
	})
}

// errFormHead refuses a skip form without the head it was shown.
var errFormHead = errors.New("the form names no head")

// laneAction runs act on the lane of the path and renders the endpoint page with what it did; a
// lane with nothing at its head is 409 on the page.
func (h *endpointHandlers) laneAction(c echo.Context, act func(w *model.Webhook, laneID int64) (string, error)) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	laneID, err := strconv.ParseInt(c.Param("laneId"), 10, 64)
	if err != nil || laneID < 1 || strconv.FormatInt(laneID, 10) != c.Param("laneId") {
		return errNotFound
	}
	notice, err := act(w, laneID)
	if errors.Is(err, errFormHead) {
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Skip a lane's head with the button in its row."}
	}
	if errors.Is(err, webhooks.ErrLaneMoved) {
		return h.renderDetail(c, w, detailView{status: http.StatusConflict,
			laneError: "That lane has moved on: the event you meant to skip was delivered or skipped meanwhile, and nothing was skipped."})
	}
	if errors.Is(err, webhooks.ErrLaneIdle) {
		return h.renderDetail(c, w, detailView{status: http.StatusConflict,
			laneError: "That lane waits for no event any more: its head was delivered or skipped meanwhile."})
	}
	if err != nil {
		return err
	}
	return h.renderDetail(c, w, detailView{status: http.StatusOK, laneNotice: notice})
}
