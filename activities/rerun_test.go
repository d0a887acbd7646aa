package activities_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
)

// TestAttemptThatDeliveredIsNotSentAgain: an attempt that delivered and runs again with the same
// number (its result was lost: a first attempt run as a local activity whose workflow task a
// signal failed, as a recovery asked during the attempt did in TestRecoverCoversAttemptsInFlight)
// answers delivered from the record and sends nothing; the next attempt number, a resend's, is
// sent.
func TestAttemptThatDeliveredIsNotSentAgain(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	var received atomic.Int32
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	box, err := secretbox.New(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "rerun@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	ins, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := ins.Deliveries[0]
	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test"}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a)
	attempt := func(n int) activities.DeliverResult {
		t.Helper()
		v, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: n, AttemptTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var res activities.DeliverResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}

	if res := attempt(1); !res.Delivered || res.Recorded {
		t.Fatalf("first attempt: %+v; want delivered and sent", res)
	}
	if res := attempt(1); !res.Delivered || !res.Recorded {
		t.Fatalf("the same attempt again: %+v; want delivered from the record", res)
	}
	if got := received.Load(); got != 1 {
		t.Fatalf("the receiver got %d requests after attempt 1 ran twice, want 1", got)
	}
	if res := attempt(2); !res.Delivered || res.Recorded {
		t.Fatalf("a resend's attempt: %+v; want delivered and sent", res)
	}
	if got := received.Load(); got != 2 {
		t.Fatalf("the receiver got %d requests after a resend, want 2", got)
	}
}
