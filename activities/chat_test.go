package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/secretbox"
)

// TestChatNoticeEscapesText (issue 41): a chat endpoint (Slack's incoming webhooks and those that
// take its shape) reads &, < and > in text as its markup, so the notice's line reaches it with
// them escaped as &amp;, &lt; and &gt;, and nothing else changed. The webhook's URL holds an &,
// its last error < and >; the notice is delivered by the delivery activity to a real HTTPS
// receiver.
func TestChatNoticeEscapesText(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	got := make(chan []byte, 1)
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
		w.WriteHeader(http.StatusOK)
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
	_, acc, err := model.CreateAPIKey(ctx, db, "chat@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	chat := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, Kind: model.KindNoticeChat, URL: receiver.URL + "/services/T0/B0/x",
		Status: model.VariantB.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	hook := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: "https://r.example.com/hook?tenant=a&b=<c>", EventType: "lead.captured",
		Status: model.VariantB.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	for _, w := range []*model.Webhook{chat, hook} {
		if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured", Data: `{}`, OnlyWebhook: hook.ID})
	if err != nil {
		t.Fatal(err)
	}
	status := 500
	res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: ev.Deliveries[0].ID, WebhookID: hook.ID, EventID: ev.Event.ID, LastAttemptAt: now,
		LastError: &model.NoticeError{Class: "http_status", StatusCode: &status, Message: "receiver answered 500: <html>Tom & Jerry</html>"}}, notices.Rules{})
	if err != nil || len(res.Notices) == 0 {
		t.Fatalf("exhaustion: %+v, %v; want a webhook.failing notice", res, err)
	}
	var notice model.Event
	var delivery model.Delivery
	if err := db.NewSelect().Model(&notice).Where("about_webhook_id = ?", hook.ID).Where("event_type = ?", model.NoticeFailing).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.NewSelect().Model(&delivery).Where("event_id = ?", notice.ID).Where("webhook_id = ?", chat.ID).Scan(ctx); err != nil {
		t.Fatalf("no delivery of the notice to the chat: %v", err)
	}

	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test"}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: delivery.ID, EventID: notice.ID, WebhookID: chat.ID, Attempt: 1, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var result activities.DeliverResult
	if err := v.Get(&result); err != nil || !result.Delivered {
		t.Fatalf("attempt: %+v, %v; want delivered", result, err)
	}
	var body struct {
		Text string `json:"text"`
	}
	raw := <-got
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("chat body %s: %v", raw, err)
	}
	line := notices.Line(&notice)
	want := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(line)
	if body.Text != want {
		t.Fatalf("the chat got\n  %s\nwant\n  %s", body.Text, want)
	}
	for _, s := range []string{"tenant=a&amp;b=&lt;c&gt;", "&lt;html&gt;Tom &amp; Jerry&lt;/html&gt;"} {
		if !strings.Contains(body.Text, s) {
			t.Errorf("the chat's text lacks %q: %s", s, body.Text)
		}
	}
}
