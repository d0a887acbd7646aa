package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
)

// ErrLaneIdle refuses a retry or a skip of a lane that waits for no delivery: nothing is at its
// head.
var ErrLaneIdle = errors.New("the lane has no delivery at its head")

// ErrLaneMoved refuses a skip that names a head the lane has passed: it was delivered or skipped
// meanwhile, and the skip, made again (a reload, a client's retry), would give up the next one.
var ErrLaneMoved = errors.New("the lane's head is no longer that delivery")

// Lanes reads a page of ordered webhook w's lanes that wait for a delivery (f.Blocked: only those
// whose head ran out of its schedule), each with its head (docs/ordering.md).
func (s *Service) Lanes(ctx context.Context, w *model.Webhook, f model.LaneFilter) ([]model.LaneView, error) {
	return model.ListLanes(ctx, s.db, w.ID, f)
}

// Lane reads one lane of w with its head; ErrNotFound when w has no such lane.
func (s *Service) Lane(ctx context.Context, w *model.Webhook, laneID int64) (*model.LaneView, error) {
	return model.GetLane(ctx, s.db, w.ID, laneID)
}

// RetryLane makes the head of one of w's lanes try again now, as a resend of that delivery does
// (Resend): an exhausted head runs its schedule again, one waiting for its next attempt makes it
// now. It returns the lane as it is after the request; ErrLaneIdle when nothing is at its head.
func (s *Service) RetryLane(ctx context.Context, w *model.Webhook, laneID int64, asked time.Time) (*model.LaneView, error) {
	lane, err := s.Lane(ctx, w, laneID)
	if err != nil {
		return nil, err
	}
	if lane.Head == nil {
		return nil, ErrLaneIdle
	}
	if _, err := s.Resend(ctx, w, lane.Head.DeliveryID, asked); err != nil && !errors.Is(err, dispatch.ErrCanceled) {
		return nil, err
	}
	return s.Lane(ctx, w, laneID)
}

// SkipLane gives up on the head of one of w's lanes, so that the lane goes on with the delivery
// behind it: the head is marked canceled (model.SkippedError says why) and its workflow is
// canceled. The event is not sent again by the lane; its owner may still resend it, out of order,
// which its header says (docs/ordering.md). head, when not 0, is the delivery the caller saw at
// the head: a lane that has passed it is ErrLaneMoved, and nothing is skipped. It returns the lane
// as it is after the request; ErrLaneIdle when nothing is at its head.
func (s *Service) SkipLane(ctx context.Context, w *model.Webhook, laneID, head int64) (*model.LaneView, error) {
	lane, err := s.Lane(ctx, w, laneID)
	if err != nil {
		return nil, err
	}
	if lane.Head == nil {
		return nil, ErrLaneIdle
	}
	if head != 0 && lane.Head.DeliveryID != head {
		return nil, ErrLaneMoved
	}
	// The workflow first: a skip that cannot reach Temporal changes nothing, and the same request
	// made again skips the same head. Then the row, which an attempt of the head not yet made reads
	// (it sends nothing), and which the lane's next head is read past.
	err = s.temporal(ctx, "skip", func(ctx context.Context, d *dispatch.Dispatcher) error {
		return d.Skip(ctx, lane.Head.EventID, w.ID)
	})
	if err != nil {
		return nil, err
	}
	skipped, err := model.SkipDelivery(ctx, s.db, lane.Head.DeliveryID, s.clock.Now())
	if err != nil {
		return nil, err
	}
	if skipped {
		s.recordAfter(ctx, w, audit.LaneSkip, audit.TargetDelivery, lane.Head.DeliveryID,
			audit.Changes{"webhookId": audit.Changed(nil, w.ID), "laneId": audit.Changed(nil, laneID)})
	}
	// A head whose workflow ran starts the next as it ends canceled; one whose workflow did not
	// (it failed) cannot, so the next is started here. Temporal refuses the second of the two. The
	// skip is done either way: a start that fails now is the sweeper's (model.StaleLanes), and the
	// request is not failed, since the same request again would skip the next head.
	err = s.temporal(ctx, "skip", func(ctx context.Context, d *dispatch.Dispatcher) error {
		return d.StartLaneHead(ctx, s.db, laneID, dispatch.StartedByLane)
	})
	if err != nil {
		s.log.Warn("skip: the lane's next head was not started; the sweeper will", "webhook", w.ID, "lane", laneID, "err", err)
	}
	return s.Lane(ctx, w, laneID)
}
