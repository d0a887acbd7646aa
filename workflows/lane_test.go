package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// laneEnv is a LaneWorkflow's test environment: the lane's deliveries are a list the NextInLane
// stand-in reads as the database would (after the number asked for, neither delivered nor
// canceled), and each child DeliveryWorkflow a stand-in that answers by delivery id.
type laneEnv struct {
	env   *testsuite.TestWorkflowEnvironment
	lane  []model.LaneWork
	state map[int64]string // delivery id -> state, as the rows say
	// outcome gives each child run's result, by delivery id (default: delivered).
	outcome func(id int64, run int) (workflows.DeliveryState, error)
	runs    map[int64]int
	// started lists the children started, in order; awaited the deliveries AwaitDone waited on.
	started, awaited []int64
	reads            []workflows.NextInLaneInput
	// afterRead, when set, runs after each read with how many deliveries it found.
	afterRead func(found int)
}

func newLaneEnv(t *testing.T, n int) *laneEnv {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(testLogger(t))
	le := &laneEnv{env: suite.NewTestWorkflowEnvironment(), state: map[int64]string{}, runs: map[int64]int{}}
	for i := 1; i <= n; i++ {
		le.add(int64(i))
	}
	var a *dispatch.Activities
	le.env.RegisterWorkflow(workflows.DeliveryWorkflow)
	le.env.RegisterActivityWithOptions(a.NextInLane, activity.RegisterOptions{Name: workflows.ActivityNextInLane})
	le.env.OnActivity(a.NextInLane, mock.Anything, mock.Anything).Return(func(_ context.Context, in workflows.NextInLaneInput) (workflows.LaneBatch, error) {
		le.reads = append(le.reads, in)
		var work []model.LaneWork
		for _, w := range le.lane {
			if w.Seq > in.Done && le.state[w.DeliveryID] != model.DeliveryDelivered && le.state[w.DeliveryID] != model.DeliveryCanceled && len(work) < 3 {
				work = append(work, w)
			}
		}
		if le.afterRead != nil {
			le.afterRead(len(work))
		}
		return workflows.LaneBatch{Work: work, Done: in.Done}, nil
	})
	le.env.OnActivity(a.AwaitDone, mock.Anything, mock.Anything).Return(func(_ context.Context, id int64) error {
		le.awaited = append(le.awaited, id)
		le.state[id] = model.DeliveryDelivered // a manual retry delivered it meanwhile
		return nil
	})
	le.env.OnWorkflow(workflows.DeliveryWorkflow, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in workflows.DeliveryInput) (workflows.DeliveryState, error) {
		le.started = append(le.started, in.DeliveryID)
		le.runs[in.DeliveryID]++
		st, err := workflows.DeliveryState{State: model.DeliveryDelivered}, error(nil)
		if le.outcome != nil {
			st, err = le.outcome(in.DeliveryID, le.runs[in.DeliveryID])
		}
		if err == nil {
			le.state[in.DeliveryID] = st.State
		}
		if in.RetryWindow != workflows.LaneRetryWindow {
			return st, fmt.Errorf("delivery %d started with retry window %s, want the lane's", in.DeliveryID, in.RetryWindow)
		}
		return st, err
	})
	return le
}

// add appends delivery id (event id 100+id) to the lane, with the next number.
func (le *laneEnv) add(id int64) {
	le.lane = append(le.lane, model.LaneWork{Seq: int64(len(le.lane) + 1),
		DeliveryRef: model.DeliveryRef{DeliveryID: id, EventID: 100 + id, WebhookID: 9, LaneID: 4, EventType: "campaign.updated", Variant: model.VariantA}})
	le.state[id] = model.DeliveryPending
}

func (le *laneEnv) run(t *testing.T) {
	t.Helper()
	tmpl := workflows.DeliveryInput{RetryWindow: workflows.LaneRetryWindow, AttemptTimeout: time.Second, RetryTaskQueue: "q-retry"}
	le.env.ExecuteWorkflow(workflows.LaneWorkflow, workflows.LaneInput{LaneID: 4, WebhookID: 9, Delivery: tmpl, FairnessKey: "account:1"})
	if !le.env.IsWorkflowCompleted() {
		t.Fatal("the lane did not complete")
	}
	if err := le.env.GetWorkflowError(); err != nil {
		t.Fatalf("the lane failed: %v", err)
	}
}

// TestLaneMakesItsDeliveriesOneAtATimeInOrder: the lane starts each delivery's workflow after the
// one before ended delivered, across batches, records how far it got with each read, and ends
// when nothing is left.
func TestLaneMakesItsDeliveriesOneAtATimeInOrder(t *testing.T) {
	le := newLaneEnv(t, 7)
	le.run(t)
	if fmt.Sprint(le.started) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("children started %v, want 1..7 in order", le.started)
	}
	// Batches of 3: reads after 0, 3, 6, then 7 finds nothing.
	var dones []int64
	for _, r := range le.reads {
		dones = append(dones, r.Done)
	}
	if fmt.Sprint(dones) != "[0 3 6 7]" {
		t.Fatalf("reads after %v, want [0 3 6 7]", dones)
	}
}

// TestLaneWaitsForAHeadThatDidNotEnd: a head whose run ended undone (it failed, or ran out of its
// window) holds the lane until its row says done (AwaitDone); a skipped head (its workflow canceled)
// lets the lane go on at once; the lane never starts a later delivery first.
func TestLaneWaitsForAHeadThatDidNotEnd(t *testing.T) {
	le := newLaneEnv(t, 4)
	le.outcome = func(id int64, _ int) (workflows.DeliveryState, error) {
		switch id {
		case 2:
			return workflows.DeliveryState{State: model.DeliveryExhausted}, temporal.NewApplicationError("internal", "SecretUnreadable")
		case 3:
			le.state[3] = model.DeliveryCanceled
			return workflows.DeliveryState{}, temporal.NewCanceledError()
		}
		return workflows.DeliveryState{State: model.DeliveryDelivered}, nil
	}
	le.run(t)
	if fmt.Sprint(le.started) != "[1 2 3 4]" {
		t.Fatalf("children started %v, want [1 2 3 4]", le.started)
	}
	if fmt.Sprint(le.awaited) != "[2]" {
		t.Fatalf("the lane waited on %v, want [2] (the head that failed), not the skipped one", le.awaited)
	}
}

// TestLaneReadsAgainWhenWokenAfterItsLastRead: a wake that comes in after the read that found
// nothing makes the lane read again rather than end, and the delivery it announced is made. (The
// SDK guards this too: a run that completes with a signal unhandled is run again with it, so the
// lane's own check of its wakes is not what this test alone can tell apart.)
func TestLaneReadsAgainWhenWokenAfterItsLastRead(t *testing.T) {
	le := newLaneEnv(t, 1)
	le.afterRead = func(found int) {
		if found == 0 && len(le.lane) == 1 {
			// A second event commits right after the read that found nothing, and its wake
			// comes in.
			le.add(2)
			le.env.SignalWorkflow(workflows.SignalWake, nil)
		}
	}
	le.run(t)
	if fmt.Sprint(le.started) != "[1 2]" {
		t.Fatalf("children started %v, want [1 2]", le.started)
	}
}

// TestLaneContinuesAsNewWithWhereItGot: a long lane continues as new, carrying the number of the
// last delivery it finished.
func TestLaneContinuesAsNewWithWhereItGot(t *testing.T) {
	le := newLaneEnv(t, 205)
	tmpl := workflows.DeliveryInput{RetryWindow: workflows.LaneRetryWindow, AttemptTimeout: time.Second, RetryTaskQueue: "q-retry"}
	le.env.ExecuteWorkflow(workflows.LaneWorkflow, workflows.LaneInput{LaneID: 4, WebhookID: 9, Delivery: tmpl})
	err := le.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) || can.WorkflowType.Name != "LaneWorkflow" {
		t.Fatalf("lane of 205 ended with %v, want continue-as-new", err)
	}
	var next workflows.LaneInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.Done != 201 || len(le.started) != 201 {
		t.Fatalf("continued with Done %d after %d children, want 201 after 201 (batches of 3 past 200)", next.Done, len(le.started))
	}
}
