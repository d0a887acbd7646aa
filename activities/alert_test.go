package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
)

// mailbox is a Mailer that keeps what it is given.
type mailbox struct {
	mu   sync.Mutex
	sent []activities.Mail
}

func (m *mailbox) Send(_ context.Context, mail activities.Mail) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, mail)
	return nil
}

// TestExhaustionMails runs MarkExhausted, then Deliver on the notice it records, as the delivery
// workflows do, against a real database: the exhaustion that moves a webhook into failing sends the
// failing mail to the owner's e-mail (a notification endpoint made on first use), the one that
// disables it sends the disable mail with the failure record and the calls that undo it.
func TestExhaustionMails(t *testing.T) {
	links := activities.Links{APIBaseURL: "https://api.example.com/", TemporalUIURL: "https://temporal.example.com", TemporalNSpace: "default"}
	cases := []struct {
		name       string
		variant    model.Variant
		eventType  string
		collection string
		auth       string
		failing    string
	}{
		{"A", model.VariantA, "campaign.created", "/api/svc/v2/webhooks", "x-api-key: <your API key>", model.StatusFailed},
		{"B", model.VariantB, "lead.captured", "/v2/svc/v2/webhooks", "Authorization: Bearer <your API key>", model.StatusFailing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := dbtest.SQLite(t)
			_, acc, err := model.CreateAPIKey(ctx, db, "owner@example.com", "")
			if err != nil {
				t.Fatal(err)
			}
			now := model.Now()
			w := &model.Webhook{AccountID: acc.ID, Variant: tc.variant, URL: "https://r.example.com/hook", EventType: tc.eventType,
				Status: tc.variant.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
			mails := &mailbox{}
			a := &activities.Activities{DB: db, Mailer: mails, Links: links, Notices: notices.Rules{Disable: notices.DisableRule{After: 120 * time.Hour, MinExhausted: 2}, WarnBefore: 48 * time.Hour}}
			suite := &testsuite.WorkflowTestSuite{}
			suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a)

			since := now.Add(-6 * 24 * time.Hour).Truncate(time.Second)
			for n := 1; n <= 2; n++ {
				res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: tc.variant, EventType: tc.eventType, Data: `{}`, OnlyWebhook: w.ID})
				if err != nil {
					t.Fatal(err)
				}
				d := res.Deliveries[0]
				at := since.Add(time.Duration(n) * time.Hour)
				if n == 1 {
					at = since
				}
				o := model.AttemptOutcome{}
				msg := "the receiver answered 500"
				o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.Error = d.ID, 1, w.URL, at, &msg
				if _, err := model.RecordAttempt(ctx, db, w, o); err != nil {
					t.Fatal(err)
				}

				val, err := env.ExecuteActivity(a.MarkExhausted, activities.ExhaustedInput{DeliveryID: d.ID, WebhookID: w.ID, EventID: d.EventID, LastError: msg, LastAttemptAt: at})
				if err != nil {
					t.Fatal(err)
				}
				var exhausted activities.ExhaustedResult
				if err := val.Get(&exhausted); err != nil {
					t.Fatal(err)
				}
				// The first is failing, past the warning's start (failing for six days of five, but
				// one exhausted delivery of the two the rule asks): failing and the warning. The
				// second disables.
				if exhausted.Alert != (n == 1) || exhausted.Disabled != (n == 2) || len(exhausted.Notices) != 3-n {
					t.Fatalf("exhaustion %d = %+v, want the alert and the warning first, the disable second", n, exhausted)
				}
				for _, notice := range exhausted.Notices {
					// The notice's one delivery, to the owner's e-mail, as its workflow makes it.
					deliveries, err := model.EventDeliveries(ctx, db, notice)
					if err != nil || len(deliveries) != 1 {
						t.Fatalf("notice %d: deliveries %v, %v; want one, to the e-mail", notice, deliveries, err)
					}
					in := activities.DeliverInput{DeliveryID: deliveries[0].ID, EventID: notice, WebhookID: deliveries[0].WebhookID, Attempt: 1}
					val, err = env.ExecuteActivity(a.Deliver, in)
					if err != nil {
						t.Fatal(err)
					}
					var sent activities.DeliverResult
					if err := val.Get(&sent); err != nil || !sent.Delivered {
						t.Fatalf("notice e-mail: %+v, %v", sent, err)
					}
				}
			}
			if len(mails.sent) != 3 {
				t.Fatalf("sent %d mails, want 3", len(mails.sent))
			}

			failing, warning, disabled := mails.sent[0], mails.sent[1], mails.sent[2]
			if want := fmt.Sprintf("webhook %d (https://r.example.com/hook, %s) will be disabled soon unless a delivery succeeds at %s",
				w.ID, tc.eventType, since.Add(120*time.Hour).UTC().Format(time.RFC3339)); !strings.Contains(warning.Body, want) {
				t.Errorf("warning mail lacks %q:\n%s", want, warning.Body)
			}
			if want := fmt.Sprintf("[webhookd] webhook %d is failing (%s)", w.ID, tc.eventType); failing.Subject != want {
				t.Errorf("failing subject = %q, want %q", failing.Subject, want)
			}
			for _, want := range []string{
				fmt.Sprintf("Your webhook %d is failing (status %q)", w.ID, tc.failing),
				fmt.Sprintf("curl -X POST https://api.example.com%s/%d/retry -H '%s'", tc.collection, w.ID, tc.auth),
				fmt.Sprintf("The delivery log is at GET https://api.example.com%s/%d/deliveries.", tc.collection, w.ID),
				fmt.Sprintf("WebhookId=%d AND DeliveryState=\"exhausted\"", w.ID),
			} {
				if !strings.Contains(failing.Body, want) {
					t.Errorf("failing mail lacks %q:\n%s", want, failing.Body)
				}
			}

			if disabled.To != "owner@example.com" {
				t.Errorf("disable mail to %q", disabled.To)
			}
			if want := fmt.Sprintf("[webhookd] webhook %d is disabled (%s)", w.ID, tc.eventType); disabled.Subject != want {
				t.Errorf("disable subject = %q, want %q", disabled.Subject, want)
			}
			for _, want := range []string{
				fmt.Sprintf("Your webhook %d is now disabled: it has failed without a single successful delivery since %s (2 deliveries exhausted).",
					w.ID, since.UTC().Format(time.RFC3339)),
				"URL:         https://r.example.com/hook",
				"Last error:  the receiver answered 500",
				"no further delivery attempts",
				"New events for it are kept, undelivered",
				fmt.Sprintf("curl -X POST https://api.example.com%s/%d/enable -H '%s'", tc.collection, w.ID, tc.auth),
				fmt.Sprintf("curl -X POST https://api.example.com%s/%d/retry -H '%s'", tc.collection, w.ID, tc.auth),
			} {
				if !strings.Contains(disabled.Body, want) {
					t.Errorf("disable mail lacks %q:\n%s", want, disabled.Body)
				}
			}
			if strings.Contains(disabled.Body, "is failing") {
				t.Errorf("disable mail reads like the failing one:\n%s", disabled.Body)
			}
		})
	}
}
