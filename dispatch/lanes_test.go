//go:build integration

package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/workflows"
)

// TestOnlyALanesHeadIsStarted (issue 43): what starts deliveries read from the database (the
// sweeper, a fan-out) starts an ordered lane's head alone and counts the deliveries behind it
// started with it; a resend of a delivery the lane has not reached starts no run of its own. No
// worker polls the queue: the workflows only need to exist, or not.
func TestOnlyALanesHeadIsStarted(t *testing.T) {
	c := temporaltest.Start(t).Client(t)
	db := dbtest.SQLite(t)
	ctx := t.Context()
	_, account, err := model.CreateAPIKey(ctx, db, "lanes@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE sqlite_sequence SET seq = ? WHERE name IN ('events', 'webhooks', 'deliveries')", time.Now().UnixNano()%1e12); err != nil {
		t.Fatal(err)
	}
	key := "data.campaignId"
	w := &model.Webhook{AccountID: account.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
		Status: model.StatusActive, Secret: "v1:x", CreatedAt: model.Now(), UpdatedAt: model.Now(), OrderingKey: &key}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	var refs []model.DeliveryRef
	for range 3 {
		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
			Data: `{"campaignId":"A"}`})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, res.Refs()...)
	}
	d := &dispatch.Dispatcher{Client: c, TaskQueue: "lanes-" + time.Now().Format("150405.000000000"), Schedule: []time.Duration{time.Minute},
		RetryWindow: time.Hour, AttemptTimeout: time.Second}
	exists := func(r model.DeliveryRef) bool {
		t.Helper()
		_, err := c.DescribeWorkflowExecution(ctx, workflows.DeliveryWorkflowID(r.EventID, r.WebhookID), "")
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			t.Fatal(err)
		}
		return err == nil
	}
	// As the sweeper reads them: from the database, where nothing says which one is the head.
	swept, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Hour), 10)
	if err != nil || len(swept) != 3 {
		t.Fatalf("undispatched: %v, %v; want the three", swept, err)
	}
	if err := d.Start(ctx, db, swept, dispatch.StartedBySweeper); err != nil {
		t.Fatal(err)
	}
	if !exists(refs[0]) || exists(refs[1]) || exists(refs[2]) {
		t.Fatalf("workflows of numbers 1, 2, 3: %v %v %v; want the head's alone", exists(refs[0]), exists(refs[1]), exists(refs[2]))
	}
	left, err := model.UndispatchedDeliveries(ctx, db, model.Now().Add(time.Hour), 10)
	if err != nil || len(left) != 0 {
		t.Fatalf("undispatched after the sweep: %v, %v; want none (the head's start stands for the lane)", left, err)
	}
	if _, err := d.Resend(context.Background(), db, w.ID, refs[2].DeliveryID); err != nil {
		t.Fatal(err)
	}
	if exists(refs[2]) {
		t.Fatal("a resend of number 3, which the lane has not reached, started a run of its own")
	}
}
