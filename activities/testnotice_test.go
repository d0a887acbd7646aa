package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
)

// TestTestNoticeMail: a notice.test to the owner's e-mail (notices.TestNotice, as the channel's test
// records it) is delivered as a short mail that says it is a test, not as a channel's failure.
func TestTestNoticeMail(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	_, acc, err := model.CreateAPIKey(ctx, db, "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB, Channels: true}
	if err := model.EnsureEmailChannel(ctx, db, scope); err != nil {
		t.Fatal(err)
	}
	chs, err := model.ListWebhooks(ctx, db, scope, model.WebhookFilter{Limit: 10})
	if err != nil || len(chs) != 1 {
		t.Fatalf("channels %v, %v", chs, err)
	}
	ne, err := notices.TestNotice(&chs[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(ctx, db, ne)
	if err != nil || len(res.Deliveries) != 1 || *res.Event.AboutWebhookID != chs[0].ID {
		t.Fatalf("test notice: %+v, %v", res, err)
	}
	mails := &mailbox{}
	a := &activities.Activities{DB: db, Mailer: mails}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	d := res.Deliveries[0]
	val, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: d.WebhookID, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	var sent activities.DeliverResult
	if err := val.Get(&sent); err != nil || !sent.Delivered || len(mails.sent) != 1 {
		t.Fatalf("delivered %+v (%v), %d mails", sent, err, len(mails.sent))
	}
	m := mails.sent[0]
	want := fmt.Sprintf("webhookd: notification endpoint %d: This is a test notice from webhookd", chs[0].ID)
	if m.To != "owner@example.com" || m.Subject != "[webhookd] test notice" || !strings.Contains(m.Body, want) || strings.Contains(m.Body, "Last error") {
		t.Fatalf("mail %+v, want a test notice saying %q", m, want)
	}
}
