package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/model"
)

// ActivityAdvanceLane is the activity of package dispatch that an ordered webhook's delivery runs
// when it is done (AdvanceLaneInput): it records that its lane got there and starts the lane's next
// delivery, if there is one (docs/ordering.md).
const ActivityAdvanceLane = "AdvanceLane"

// LaneRetryWindow is how long an ordered webhook's delivery waits, exhausted, for its owner to
// retry or skip it: as long as it takes, since its lane waits behind it (docs/ordering.md).
const LaneRetryWindow = 10 * 365 * 24 * time.Hour

// AdvanceLaneInput says which lane's delivery is done, and its number there.
type AdvanceLaneInput struct {
	LaneID int64
	Seq    int64
}

// advanceLane passes an ordered webhook's lane on once its delivery is done, delivered or canceled
// (skipped by its owner, or its webhook deleted): the next delivery of the lane is started then,
// and not before. A delivery that is not done (its run failed; a manual retry runs it again) holds
// its lane. It runs on a disconnected context, since a canceled delivery's is canceled, as a local
// activity: a marker in this run's last workflow task, and no task of its own.
//
// Only a run whose input names a lane takes this step, and no run of earlier code did, so their
// histories replay as before without a workflow.GetVersion, whose TemporalChangeVersion upsert
// would cost every ordered delivery a visibility write (docs/operations.md, "Changing a workflow's
// shape").
func (r *deliveryRun) advanceLane() error {
	if r.in.Lane == 0 || (r.st.State != model.DeliveryDelivered && r.st.State != model.DeliveryCanceled) {
		return nil
	}
	ctx, _ := workflow.NewDisconnectedContext(r.ctx)
	opts := dbOptions()
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: opts.StartToCloseTimeout,
		ScheduleToCloseTimeout: localRetryHorizon, RetryPolicy: opts.RetryPolicy,
		Summary: fmt.Sprintf("number %d of lane %d done: start the next", r.in.LaneSeq, r.in.Lane)})
	return workflow.ExecuteLocalActivity(ctx, ActivityAdvanceLane, AdvanceLaneInput{LaneID: r.in.Lane, Seq: r.in.LaneSeq}).Get(ctx, nil)
}
