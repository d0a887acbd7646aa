package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/internal/smtptest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
)

// TestRepeatedNoticeMailKeepsItsMessageID: the failing e-mail of a webhook (its webhook.failing
// notice to the owner's e-mail) is sent three times over SMTP to a real server, as a kill -9 after
// the send and before its record, then a retry of the schedule, would send it. Each copy carries
// the same Message-ID, derived from the notice and the channel (the delivery's webhook-id) and the
// host of the service's public URL, so that a mail client shows the repeats as one message.
func TestRepeatedNoticeMailKeepsItsMessageID(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	_, acc, err := model.CreateAPIKey(ctx, db, "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: "https://r.example.com/hook", EventType: "lead.captured",
		Status: model.VariantB.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	mb := smtptest.Start(t)
	mailer, err := activities.NewMailer("smtp://"+mb.Addr, "webhookd <alerts@example.com>", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Mailer: mailer, Links: activities.Links{APIBaseURL: "https://hooks.example.com:8443/"}}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: w.Variant, EventType: w.EventType, Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Deliveries[0]
	msg := "the receiver answered 500"
	o := model.AttemptOutcome{}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.Error = d.ID, 1, w.URL, now, &msg
	if _, err := model.RecordAttempt(ctx, db, w, o); err != nil {
		t.Fatal(err)
	}
	val, err := env.ExecuteActivity(a.MarkExhausted, activities.ExhaustedInput{DeliveryID: d.ID, WebhookID: w.ID, EventID: d.EventID, LastError: msg, LastAttemptAt: now})
	if err != nil {
		t.Fatal(err)
	}
	var exhausted activities.ExhaustedResult
	if err := val.Get(&exhausted); err != nil || len(exhausted.Notices) != 1 {
		t.Fatalf("exhaustion = %+v, %v; want one notice, webhook.failing", exhausted, err)
	}
	notice := exhausted.Notices[0]
	deliveries, err := model.EventDeliveries(ctx, db, notice)
	if err != nil || len(deliveries) != 1 {
		t.Fatalf("notice %d: deliveries %v, %v; want one, to the e-mail", notice, deliveries, err)
	}
	mail := deliveries[0]
	// Three copies: the first attempt, then two more (resends). An attempt that runs again after it
	// was recorded as delivered sends nothing (TestAttemptThatDeliveredIsNotSentAgain); one whose
	// record a crash lost is sent again, as these are.
	for _, attempt := range []int{1, 2, 3} {
		in := activities.DeliverInput{DeliveryID: mail.ID, EventID: notice, WebhookID: mail.WebhookID, Attempt: attempt}
		val, err := env.ExecuteActivity(a.Deliver, in)
		if err != nil {
			t.Fatal(err)
		}
		var sent activities.DeliverResult
		if err := val.Get(&sent); err != nil || !sent.Delivered {
			t.Fatalf("attempt %d: %+v, %v", attempt, sent, err)
		}
	}
	got := mb.Messages()
	if len(got) != 3 {
		t.Fatalf("the server received %d mails, want 3", len(got))
	}
	want := fmt.Sprintf("<%s@hooks.example.com>", wire.MessageID(notice, mail.WebhookID))
	for i, m := range got {
		if id := m.Header(t, "Message-Id"); id != want {
			t.Errorf("copy %d: Message-ID %q, want %q (the same in every copy)", i+1, id, want)
		}
	}

	// Without a public URL, the host part is the sender's domain.
	a.Links = activities.Links{}
	if _, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: mail.ID, EventID: notice, WebhookID: mail.WebhookID, Attempt: 4}); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("<%s@example.com>", wire.MessageID(notice, mail.WebhookID))
	if got := mb.Messages(); len(got) != 4 || got[3].Header(t, "Message-Id") != want {
		t.Errorf("without a public URL: %d mails, the last with Message-ID %q; want %q", len(got), got[len(got)-1].Header(t, "Message-Id"), want)
	}
}
