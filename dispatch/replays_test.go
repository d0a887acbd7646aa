package dispatch_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestReplayDeliveriesResumesAfterItsProgress (issue 46): a replay's activity run again after a
// crash starts after the last delivery its row records handled, so none it handed over before is
// handed over again; a delivery no longer in its states is skipped; an in-flight one is signaled
// only if its attempt fails; the replay ends done with its items gone. A canceled replay's activity
// hands nothing over.
func TestReplayDeliveriesResumesAfterItsProgress(t *testing.T) {
	f := newFixture(t)
	a := &dispatch.Activities{DB: f.db.DB, Dispatcher: f.d}
	var refs []model.DeliveryRef
	for range 3 {
		refs = append(refs, f.delivery(t, model.DeliveryExhausted, 2))
	}
	delivered := f.delivery(t, model.DeliveryExhausted, 2)
	inFlight := f.delivery(t, model.DeliveryPending, 0)
	f.tc.run(workflows.DeliveryWorkflowID(inFlight.EventID, inFlight.WebhookID), nil)
	last := f.delivery(t, model.DeliveryExhausted, 2)
	ids := []int64{refs[0].DeliveryID, refs[1].DeliveryID, refs[2].DeliveryID, delivered.DeliveryID, inFlight.DeliveryID, last.DeliveryID}
	r := &model.Replay{AccountID: f.hook.AccountID, Variant: model.VariantA, Criteria: `{"since":"2020-01-01T00:00:00Z","until":"2999-01-01T00:00:00Z","states":["pending","delivering","retrying","exhausted"]}`}
	if err := model.CreateReplay(t.Context(), f.db, r, ids, 1); err != nil {
		t.Fatal(err)
	}
	// As if the activity had died after handing over the first two.
	for _, id := range ids[:2] {
		if ok, err := model.AdvanceReplay(t.Context(), f.db, r.ID, id, true); err != nil || !ok {
			t.Fatalf("advance: %v, %v", ok, err)
		}
	}
	if _, err := f.db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", model.DeliveryDelivered).Where("id = ?", delivered.DeliveryID).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}

	n, err := runBatch(t, f, a.ReplayDeliveries, workflows.ReplayInput{ReplayID: r.ID})
	if err != nil || n != 5 {
		t.Fatalf("ReplayDeliveries = %d, %v; want 5 (2 before the crash, 3 now)", n, err)
	}
	for i, ref := range []model.DeliveryRef{refs[0], refs[1], refs[2], delivered, last} {
		want := 0
		if i == 2 || i == 4 {
			want = 1
		}
		if got := len(f.tc.startsOf(workflows.DeliveryWorkflowID(ref.EventID, ref.WebhookID))); got != want {
			t.Errorf("delivery %d: %d new runs, want %d", ref.DeliveryID, got, want)
		}
	}
	if s := f.tc.signalsTo(workflows.DeliveryWorkflowID(inFlight.EventID, inFlight.WebhookID)); len(s) != 1 {
		t.Errorf("the in-flight delivery got %d signals, want 1", len(s))
	} else if req, ok := s[0].arg.(workflows.RetryRequest); !ok || !req.UnlessDelivered {
		t.Errorf("the in-flight delivery's signal = %#v, want a retry unless delivered", s[0].arg)
	}
	got, err := model.GetReplay(t.Context(), f.db, nil, r.ID)
	if err != nil || got.State != model.ReplayDone || got.Sent != 5 || got.Skipped != 1 || got.Remaining() != 0 || got.FinishedAt == nil {
		t.Fatalf("replay = %+v, %v; want done, 5 sent, 1 skipped", got, err)
	}
	if left, err := model.ReplayItems(t.Context(), f.db, r.ID, 0, 100); err != nil || len(left) != 0 {
		t.Fatalf("items left: %v, %v", left, err)
	}

	// A replay canceled before its activity ran hands nothing over.
	other := f.delivery(t, model.DeliveryExhausted, 2)
	c := &model.Replay{AccountID: f.hook.AccountID, Variant: model.VariantA, Criteria: r.Criteria}
	if err := model.CreateReplay(t.Context(), f.db, c, []int64{other.DeliveryID}, 1); err != nil {
		t.Fatal(err)
	}
	if moved, err := model.EndReplay(t.Context(), f.db, nil, c.ID, model.ReplayCanceled); err != nil || !moved {
		t.Fatalf("cancel: %v, %v", moved, err)
	}
	if n, err := runBatch(t, f, a.ReplayDeliveries, workflows.ReplayInput{ReplayID: c.ID}); err != nil || n != 0 {
		t.Fatalf("canceled ReplayDeliveries = %d, %v", n, err)
	}
	if d := f.load(t, other.DeliveryID); d.State != model.DeliveryExhausted || len(f.tc.startsOf(workflows.DeliveryWorkflowID(other.EventID, other.WebhookID))) != 0 {
		t.Fatalf("the canceled replay's delivery: %s", d.State)
	}
}
