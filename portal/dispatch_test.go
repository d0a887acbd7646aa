//go:build integration

package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/workflows"
)

// TestCreateAndDeleteDispatch: a variant B webhook made in the portal gets its test delivery's
// workflow started after the commit, as from the API; deleting it cancels that workflow and the
// delivery. The task queue has no worker, so the workflow waits and nothing is delivered.
func TestCreateAndDeleteDispatch(t *testing.T) {
	tc := temporaltest.Start(t).Client(t)
	// One database: both would number their first event and webhook 1, and so name the same
	// workflow on the one dev server. TestEndpoints runs the same handlers on both.
	for _, b := range dbtest.Backends()[:1] {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), withTemporal(t, tc))
			ctx := t.Context()
			account := e.account(t)
			cookie := e.enter(t, e.link(t, account.ID, model.VariantB, false))
			csrf := e.csrf(t, cookie)
			expect(t, e.do(t, "POST", "/portal/webhooks", cookie, url.Values{"csrf": {csrf}, "url": {"https://r.example.com/"}, "eventType": {"lead.captured"}}), http.StatusCreated)
			hooks, err := model.ListWebhooks(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: model.VariantB}, model.WebhookFilter{Limit: 10})
			if err != nil || len(hooks) != 1 {
				t.Fatalf("webhooks: %v %v", hooks, err)
			}
			var d model.Delivery
			if err := e.db.NewSelect().Model(&d).Where("webhook_id = ?", hooks[0].ID).Scan(ctx); err != nil {
				t.Fatalf("the test delivery: %v", err)
			}
			if d.DispatchedAt == nil {
				t.Fatal("the test delivery was not dispatched after the commit")
			}
			wf := workflows.DeliveryWorkflowID(d.EventID, d.WebhookID)
			if desc, err := tc.DescribeWorkflowExecution(ctx, wf, ""); err != nil || desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				t.Fatalf("workflow %s: %v, %v", wf, desc, err)
			}
			expect(t, e.do(t, "POST", fmt.Sprintf("/portal/webhooks/%d/delete", d.WebhookID), cookie, url.Values{"csrf": {csrf}}), http.StatusSeeOther)
			var state string
			if err := e.db.NewSelect().Table("deliveries").Column("state").Where("id = ?", d.ID).Scan(ctx, &state); err != nil || state != model.DeliveryCanceled {
				t.Fatalf("delivery state after delete = %q, %v; want canceled", state, err)
			}
			// No worker polls the queue, so the workflow cannot end yet: the cancellation is asked.
			deadline := time.Now().Add(30 * time.Second)
			for !cancelRequested(t, tc, wf) {
				if time.Now().After(deadline) {
					t.Fatalf("no cancellation of workflow %s after delete", wf)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

func cancelRequested(t *testing.T, tc client.Client, workflowID string) bool {
	t.Helper()
	it := tc.GetWorkflowHistory(t.Context(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED {
			return true
		}
	}
	return false
}

// TestSendTestDispatch: the portal's test delivery has its workflow started after the commit, as
// the API's POST .../test has. The task queue has no worker, so the workflow waits.
func TestSendTestDispatch(t *testing.T) {
	tc := temporaltest.Start(t).Client(t)
	for _, b := range dbtest.Backends()[:1] {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), withTemporal(t, tc))
			ctx := t.Context()
			account := e.account(t)
			// Webhook ids 1 and 2 elsewhere: TestCreateAndDeleteDispatch's workflow, on the same
			// dev server, is delivery:1:1.
			for range 2 {
				e.webhook(t, e.account(t).ID, model.VariantB, "https://elsewhere.example.com/")
			}
			w, _ := e.secretWebhook(t, account.ID, model.VariantA, "https://r.example.com/")
			cookie := e.enter(t, e.link(t, account.ID, model.VariantA, false))
			rec := e.do(t, "POST", fmt.Sprintf("/portal/webhooks/%d/test", w.ID), cookie, url.Values{"csrf": {e.csrf(t, cookie)}})
			expect(t, rec, http.StatusSeeOther)
			var d model.Delivery
			if err := e.db.NewSelect().Model(&d).Where("webhook_id = ?", w.ID).Scan(ctx); err != nil {
				t.Fatalf("the test delivery: %v", err)
			}
			if loc := rec.Header().Get("Location"); loc != fmt.Sprintf("/portal/deliveries/%d", d.ID) {
				t.Fatalf("Location = %q, want delivery %d's page", loc, d.ID)
			}
			if d.DispatchedAt == nil {
				t.Fatal("the test delivery was not dispatched after the commit")
			}
			wf := workflows.DeliveryWorkflowID(d.EventID, d.WebhookID)
			if desc, err := tc.DescribeWorkflowExecution(ctx, wf, ""); err != nil || desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
				t.Fatalf("workflow %s: %v, %v", wf, desc, err)
			}
		})
	}
}

// withTemporal gives the portal a Dispatcher on the dev server, on a task queue of the test's own
// that no worker polls: the workflows start and wait, and nothing is delivered.
func withTemporal(t *testing.T, tc client.Client) func(*envConfig) {
	return func(c *envConfig) {
		c.Dispatcher = &dispatch.Dispatcher{Client: tc, TaskQueue: "nowhere-" + strings.ReplaceAll(t.Name(), "/", "-"),
			Schedule: []time.Duration{time.Minute}, RetryWindow: time.Hour, AttemptTimeout: time.Second}
	}
}
