package sources

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/model"
)

// scheduleError refuses a schedule of a website that is not a draft: an invalid transition,
// worded as the schedule it refuses.
type scheduleError struct{ status string }

func (e *scheduleError) Error() string {
	return "a " + e.status + " website cannot be scheduled for publication"
}

func (e *scheduleError) Is(target error) bool { return target == ErrInvalidTransition }

// ScheduleWebsite schedules the publication of the account's draft website id at a time in the
// future (ErrScheduleNotFuture otherwise): it saves the time, then starts the website's durable
// timer, which publishes then (website.published with scheduledPublish true). No transaction
// stays open across the call to Temporal: on SQLite that would hold the one write lock of every
// account for as long as Temporal takes to answer.
//
// The row is the truth and the timer follows it: a timer that fires for a time the row no longer
// holds publishes nothing. When the timer cannot be started the schedule is put back as it was
// (compare-and-set, so a later change is kept) and the answer is ErrUnavailable with nothing
// changed. A website that is not a draft is ErrInvalidTransition.
func (s *Service) ScheduleWebsite(ctx context.Context, accountID, id int64, at time.Time) (*Website, error) {
	if !at.After(time.Now()) {
		return nil, ErrScheduleNotFuture
	}
	if s.timers == nil {
		return nil, ErrUnavailable
	}
	var w *Website
	var prev *time.Time
	var prevUpdatedAt time.Time
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		if w, err = GetWebsite(ctx, cs.Tx, accountID, id, true); err != nil {
			return err
		}
		if w.Status != WebsiteDraft {
			return &scheduleError{status: w.Status}
		}
		prev, prevUpdatedAt, w.ScheduledAt = w.ScheduledAt, w.UpdatedAt, &at
		return SaveWebsite(ctx, cs.Tx, w)
	})
	if err != nil {
		return nil, err
	}
	// Two schedules of one website can commit in one order and reach Temporal in the other,
	// leaving the timer on the older time. So after starting a timer, read the row again and
	// follow it until the timer started last is for the time the row holds.
	want := at
	for i := range 3 {
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.timers.SchedulePublish(tctx, w.ID, want)
		cancel()
		if err != nil && i > 0 {
			// Only following another request's schedule failed; that request answers for it.
			s.log.Warn("follow a newer schedule", "website", w.ID, "err", err)
			return w, nil
		}
		if err != nil {
			s.log.Warn("schedule publication", "website", w.ID, "err", err)
			// Undone without the request's cancellation: the client may be gone, and the row must
			// not keep promising a publication that no timer will make.
			restored, uerr := UnscheduleWebsite(context.WithoutCancel(ctx), s.db, w.ID, at, prev, prevUpdatedAt)
			if uerr != nil {
				s.log.Error("undo schedule after Temporal refused", "website", w.ID, "err", uerr)
			} else if !restored {
				s.log.Info("schedule changed again before it could be undone", "website", w.ID)
			}
			return nil, ErrUnavailable
		}
		cur, err := GetWebsite(ctx, s.db, accountID, id, false)
		if err != nil || cur.Status != WebsiteDraft || cur.ScheduledAt == nil || cur.ScheduledAt.Equal(want) {
			// Current, or published, archived or deleted since: a leftover timer then finds the
			// schedule gone and publishes nothing.
			return w, nil
		}
		want = *cur.ScheduledAt
	}
	return w, nil
}
