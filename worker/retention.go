package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// Retention configures the purge of expired events, deliveries and attempts.
type Retention struct {
	// Keep is WEBHOOKD_RETENTION: rows that expired longer ago go. Zero turns retention off: the
	// schedule is deleted, and nothing is.
	Keep time.Duration
	// BatchSize (default model.DefaultPurgeBatch) and MaxBatches (default
	// workflows.DefaultRetentionBatches) shape each run.
	BatchSize  int
	MaxBatches int
}

// retentionEvery is the schedule's interval. A run deletes everything expired, so the interval
// only bounds how long past its retention a row may live.
const retentionEvery = time.Hour

func (r Retention) input() workflows.RetentionInput {
	in := workflows.RetentionInput{Retention: r.Keep, BatchSize: r.BatchSize, MaxBatches: r.MaxBatches}
	if in.BatchSize <= 0 {
		in.BatchSize = model.DefaultPurgeBatch
	}
	if in.MaxBatches <= 0 {
		in.MaxBatches = workflows.DefaultRetentionBatches
	}
	return in
}

// EnsureRetentionSchedule makes the Temporal Schedule workflows.RetentionScheduleID(queue) match r:
// it creates it, or, when it exists, updates its spec, action and policies to r, keeping its state
// (an operator's pause and note stay). With retention off it deletes the schedule. Every worker
// replica calls it at start, several at once: a create that loses the race updates instead, and
// an update that would change nothing is skipped, so no replica fails and there is one schedule.
func EnsureRetentionSchedule(ctx context.Context, c client.Client, queue string, r Retention) error {
	id := workflows.RetentionScheduleID(queue)
	sc := c.ScheduleClient()
	if r.Keep <= 0 {
		err := sc.GetHandle(ctx, id).Delete(ctx)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("delete retention schedule %s: %w", id, err)
		}
		return nil
	}
	in := r.input()
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: retentionEvery}}}
	// No fairness key: the key exists to keep accounts apart, and this is no account's work. Without
	// one it shares the default key with the other system workflows (scheduled publications), which
	// fairness gives its own turn beside every account's.
	action := &client.ScheduleWorkflowAction{ID: id, Workflow: workflows.Retention, Args: []any{in}, TaskQueue: queue}
	// A run that outlasts the interval makes the schedule skip the next one, and after an outage
	// one run catches up: each run deletes everything expired, so missed runs need no replay.
	const overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
	const catchup = retentionEvery
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID: id, Spec: spec, Action: action, Overlap: overlap, CatchupWindow: catchup,
		Note: "Deletes the events, deliveries and attempts older than WEBHOOKD_RETENTION (the workflow's input). Each webhookd worker updates its spec and action at start, never its state: a pause stays.",
	})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		if err != nil {
			return fmt.Errorf("create retention schedule %s: %w", id, err)
		}
		return nil
	}
	err = sc.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(u client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := u.Description.Schedule
			if sameRetentionSchedule(s, spec, action, in, overlap, catchup) {
				return nil, temporal.ErrSkipScheduleUpdate
			}
			s.Spec, s.Action = &spec, action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap, s.Policy.CatchupWindow = overlap, catchup
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update retention schedule %s: %w", id, err)
	}
	return nil
}

// sameRetentionSchedule reports whether the described schedule already does what the config says.
func sameRetentionSchedule(s client.Schedule, spec client.ScheduleSpec, action *client.ScheduleWorkflowAction, in workflows.RetentionInput,
	overlap enumspb.ScheduleOverlapPolicy, catchup time.Duration) bool {
	got, ok := s.Action.(*client.ScheduleWorkflowAction)
	if !ok || s.Spec == nil || s.Policy == nil || got.ID != action.ID || got.TaskQueue != action.TaskQueue ||
		got.Workflow != "Retention" || len(got.Args) != 1 {
		return false
	}
	if len(s.Spec.Intervals) != 1 || s.Spec.Intervals[0] != spec.Intervals[0] || len(s.Spec.Calendars) != 0 || len(s.Spec.CronExpressions) != 0 {
		return false
	}
	if s.Policy.Overlap != overlap || s.Policy.CatchupWindow != catchup {
		return false
	}
	p, ok := got.Args[0].(*commonpb.Payload)
	var prev workflows.RetentionInput
	return ok && converter.GetDefaultDataConverter().FromPayload(p, &prev) == nil && reflect.DeepEqual(prev, in)
}

// keepRetentionScheduled runs EnsureRetentionSchedule until it succeeds or ctx ends, backing off
// between tries, so a Temporal hiccup at start neither stops the worker nor leaves the schedule
// stale. The returned wait blocks until it is done.
func keepRetentionScheduled(ctx context.Context, c client.Client, queue string, r Retention, logger *slog.Logger) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for backoff := time.Second; ; backoff = min(2*backoff, time.Minute) {
			err := EnsureRetentionSchedule(ctx, c, queue, r)
			if err == nil && r.Keep > 0 {
				logger.Info("retention schedule in place", "schedule", workflows.RetentionScheduleID(queue), "retention", r.Keep)
			}
			if err == nil {
				return
			}
			logger.Warn("retention schedule not set; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	})
	return wg.Wait
}
