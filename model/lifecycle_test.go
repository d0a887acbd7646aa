package model_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// TestLifecycleTransitions walks every writer of deliveries.state from every state (and, for the
// writers that take one, every state they may be asked for) and refuses a move that model.Transitions
// does not list under that writer; then it refuses a transition the table lists that no writer
// made, so the table says exactly what the code does.
func TestLifecycleTransitions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		w := lifecycleWebhook(t, db)
		seen := map[model.Transition]bool{}
		// fresh makes a delivery and puts it in from, outside the lifecycle (a test's setup).
		fresh := func(from string) int64 {
			t.Helper()
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: w.AccountID, Variant: w.Variant, EventType: w.EventType, Data: `{}`})
			if err != nil || len(res.Deliveries) != 1 {
				t.Fatalf("insert event: %v, %d deliveries", err, len(res.Deliveries))
			}
			id := res.Deliveries[0].ID
			seen[model.Transition{From: "", To: stateOf(t, db, id), By: model.ByCreate}] = true
			if _, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", from).Where("id = ?", id).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			return id
		}
		check := func(by, from string, id int64) {
			t.Helper()
			to := stateOf(t, db, id)
			if to == from {
				return
			}
			if !model.AllowedBy(by, from, to) {
				t.Errorf("%s moved a delivery from %s to %s: not in the lifecycle table", by, from, to)
			}
			seen[model.Transition{From: from, To: to, By: by}] = true
		}
		next := time.Now().Add(time.Minute)
		writers := []struct {
			by  string
			run func(id int64) error
		}{
			{model.ByAttempt, func(id int64) error {
				_, err := model.RecordAttempt(ctx, db, w, lifecycleOutcome(id, true, nil))
				return err
			}},
			{model.ByAttempt, func(id int64) error {
				_, err := model.RecordAttempt(ctx, db, w, lifecycleOutcome(id, false, &next))
				return err
			}},
			{model.ByAttempt, func(id int64) error {
				_, err := model.RecordAttempt(ctx, db, w, lifecycleOutcome(id, false, nil))
				return err
			}},
			{model.ByExhaust, func(id int64) error {
				_, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: id, WebhookID: w.ID, LastAttemptAt: time.Now()}, notices.Rules{Disable: notices.DisableRule{}})
				return err
			}},
			{model.ByHold, func(id int64) error { return model.HoldDelivery(ctx, db, id, "the webhook is disabled") }},
			{model.BySettle, func(id int64) error { return model.SettleClaim(ctx, db, id, model.DeliveryDelivered) }},
			{model.BySettle, func(id int64) error { return model.SettleClaim(ctx, db, id, model.DeliveryExhausted) }},
			{model.ByCancel, func(id int64) error { return model.CancelDelivery(ctx, db, id) }},
			{model.ByDelete, func(int64) error { return model.CancelOpenDeliveries(ctx, db, w.ID) }},
		}
		for _, from := range []string{model.DeliveryExhausted, model.DeliveryDelivered} {
			writers = append(writers, struct {
				by  string
				run func(id int64) error
			}{model.ByClaim, func(id int64) error {
				_, _, err := model.ClaimDelivery(ctx, db, id, []string{from})
				return err
			}})
		}
		for _, sets := range [][]string{model.ResendableStates, model.RetriableStates, model.RecoverableStates, model.DeliveryStates} {
			writers = append(writers, struct {
				by  string
				run func(id int64) error
			}{model.ByClaim, func(id int64) error {
				_, _, err := model.ClaimDelivery(ctx, db, id, sets)
				return err
			}})
		}
		for _, back := range model.DeliveryStates[:len(model.DeliveryStates)-1] {
			writers = append(writers, struct {
				by  string
				run func(id int64) error
			}{model.ByRestore, func(id int64) error {
				at := model.Now()
				if _, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set("claimed_at = ?", at).Where("id = ?", id).Exec(ctx); err != nil {
					return err
				}
				return model.RestoreClaim(ctx, db, model.DeliveryRef{DeliveryID: id, State: back}, at)
			}})
		}
		for _, wr := range writers {
			for _, from := range model.DeliveryStates {
				id := fresh(from)
				if err := wr.run(id); err != nil {
					t.Fatalf("%s from %s: %v", wr.by, from, err)
				}
				check(wr.by, from, id)
			}
		}
		for _, tr := range model.Transitions {
			if !seen[tr] {
				t.Errorf("the lifecycle table lists %s from %q to %s, which no writer made", tr.By, tr.From, tr.To)
			}
		}
		// A settle or restore asked for a state a workflow cannot be in is refused.
		if err := model.SettleClaim(ctx, db, fresh(model.DeliveryDelivering), model.DeliveryPending); err == nil {
			t.Error("SettleClaim to pending accepted")
		}
		if err := model.RestoreClaim(ctx, db, model.DeliveryRef{DeliveryID: fresh(model.DeliveryDelivering), State: model.DeliveryCanceled}, model.Now()); err == nil {
			t.Error("RestoreClaim to canceled accepted")
		}
	})
}

func lifecycleOutcome(deliveryID int64, success bool, next *time.Time) model.AttemptOutcome {
	status := 200
	o := model.AttemptOutcome{Success: success, NextAttemptAt: next}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.StatusCode = deliveryID, 1, "https://r.example.com/", model.Now(), &status
	if !success {
		status = 500
		class, msg := "http_status", "receiver answered 500"
		o.ErrorClass, o.Error = &class, &msg
	}
	return o
}

func lifecycleWebhook(t *testing.T, db bun.IDB) *model.Webhook {
	t.Helper()
	ctx := context.Background()
	_, acc, err := model.CreateAPIKey(ctx, db, fmt.Sprintf("lifecycle-%d@example.com", time.Now().UnixNano()), "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
		Status: model.VariantB.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	return w
}
