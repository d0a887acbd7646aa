package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestDeliverCustomHeaders (issue 31): an attempt sends the webhook's own headers after webhookd's,
// a stored reserved name is skipped rather than overriding webhookd's, and the attempt log records
// each custom header by name with its value redacted; neither the log nor the activity's log output
// holds the value.
func TestDeliverCustomHeaders(t *testing.T) {
	const token = "tok-0123456789-abcd"
	ctx := context.Background()
	db := dbtest.SQLite(t)
	got := make(chan http.Header, 1)
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.Header.Get("X-Api-Token") != token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	box, err := model.NewSecretBox(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	// Stored as webhooks.Service stores them; User-Agent could only be there by a defect, and is
	// skipped at send time all the same.
	headers, err := box.Seal(`{"X-Api-Token":"` + token + `","User-Agent":"evil","x-tenant":"t1"}`)
	if err != nil {
		t.Fatal(err)
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "headers@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, Headers: &headers, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Deliveries[0]

	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test"}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: 1, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var result activities.DeliverResult
	if err := v.Get(&result); err != nil || !result.Delivered {
		t.Fatalf("attempt: %+v, %v; want delivered", result, err)
	}
	sent := <-got
	if sent.Get("X-Api-Token") != token || sent.Get("X-Tenant") != "t1" || sent.Get("User-Agent") != "webhookd/test" || sent.Get("Webhook-Signature") == "" {
		t.Fatalf("the receiver got %v", sent)
	}

	view, err := model.GetDelivery(ctx, db, w.ID, d.ID)
	if err != nil || len(view.Log) != 1 || view.Log[0].RequestHeaders == nil {
		t.Fatalf("delivery %+v, %v", view, err)
	}
	logHeaders := *view.Log[0].RequestHeaders
	var recorded map[string]string
	if err := json.Unmarshal([]byte(logHeaders), &recorded); err != nil {
		t.Fatal(err)
	}
	if recorded["X-Api-Token"] != "••••abcd" || recorded["X-Tenant"] != "••••••••" || recorded["User-Agent"] != "webhookd/test" {
		t.Fatalf("the attempt log recorded %s", logHeaders)
	}
	for what, text := range map[string]string{"the attempt log": logHeaders, "the log output": logged.String()} {
		if strings.Contains(text, token) || strings.Contains(text, "t1\"") || strings.Contains(text, "evil") {
			t.Fatalf("%s holds a header's value: %s", what, text)
		}
	}
}
