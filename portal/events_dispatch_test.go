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

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/workflows"
)

// TestResendAndRecoverDispatch: resend from the delivery page runs the exhausted delivery's
// workflow again and comes back to the page (303); a canceled delivery is refused with a reason;
// recover queues the endpoint's failed deliveries and says how many. The task queue has no worker,
// so the workflows wait and nothing is delivered.
func TestResendAndRecoverDispatch(t *testing.T) {
	tc := temporaltest.Start(t).Client(t)
	b := dbtest.Backends()[0]
	e := newEnv(t, b.Open(t), withTemporal(t, tc))
	ctx := t.Context()
	// Ids past those of the package's other Temporal tests, which share the dev server: the
	// workflow ids are made of them.
	filler := e.account(t)
	for range 20 {
		e.webhook(t, filler.ID, model.VariantA, "https://filler.example.com/")
		e.publish(t, filler.ID, model.VariantB, "lead.captured", `{"n":0}`)
	}
	account := e.account(t)
	v := model.VariantB
	w, _ := e.signedWebhook(t, account.ID, v, "https://r.example.com/")
	var deliveries []int64
	var events []int64
	for range 3 {
		res := e.publish(t, account.ID, v, w.EventType, `{"n":1}`)
		if err := dbtest.SetDeliveryState(ctx, e.db, res.Deliveries[0].ID, model.DeliveryExhausted); err != nil {
			t.Fatal(err)
		}
		deliveries, events = append(deliveries, res.Deliveries[0].ID), append(events, res.Event.ID)
	}
	cookie := e.enter(t, e.link(t, account.ID, v, false))
	csrf := e.csrf(t, cookie)

	// Resend.
	page := fmt.Sprintf("/portal/deliveries/%d", deliveries[0])
	rec := e.do(t, "POST", page+"/resend", cookie, url.Values{"csrf": {csrf}})
	expect(t, rec, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, page+"?") {
		t.Fatalf("resend redirects to %q, want the delivery page", loc)
	}
	wf := workflows.DeliveryWorkflowID(events[0], w.ID)
	if desc, err := tc.DescribeWorkflowExecution(ctx, wf, ""); err != nil || desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("workflow %s after resend: %v, %v", wf, desc, err)
	}
	rec = e.do(t, "GET", rec.Header().Get("Location"), cookie, nil)
	expect(t, rec, http.StatusOK)
	if body := rec.Body.String(); !strings.Contains(body, "queued to be sent again") {
		t.Fatalf("the delivery page after a resend:\n%s", body)
	}

	// A canceled delivery: 409 with the reason, and no workflow.
	if err := model.CancelDelivery(ctx, e.db, deliveries[2]); err != nil {
		t.Fatal(err)
	}
	rec = e.do(t, "POST", fmt.Sprintf("/portal/deliveries/%d/resend", deliveries[2]), cookie, url.Values{"csrf": {csrf}})
	expect(t, rec, http.StatusConflict)
	if !strings.Contains(rec.Body.String(), "canceled") {
		t.Fatalf("resend of a canceled delivery:\n%s", rec.Body)
	}
	if _, err := tc.DescribeWorkflowExecution(ctx, workflows.DeliveryWorkflowID(events[2], w.ID), ""); err == nil {
		t.Fatal("a canceled delivery's workflow was started")
	}

	// Recover: the exhausted delivery left, and the resent one, delivering, which it retries if
	// that attempt fails (the other is canceled).
	since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
	path := fmt.Sprintf("/portal/webhooks/%d/recover", w.ID)
	rec = e.do(t, "GET", path+"?since="+since, cookie, nil)
	expect(t, rec, http.StatusOK)
	if !strings.Contains(rec.Body.String(), "<strong>2</strong> deliveries since") {
		t.Fatalf("the recover count:\n%s", rec.Body)
	}
	rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "since": {since}})
	expect(t, rec, http.StatusOK)
	if !strings.Contains(rec.Body.String(), "2 deliveries queued") {
		t.Fatalf("the recover answer:\n%s", rec.Body)
	}
}
