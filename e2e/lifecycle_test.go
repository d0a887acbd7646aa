//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/workflows"
)

// TestAttemptTimeoutComesFromTheWorkflowInput: the worker's egress client allows a minute, the
// starter's attempt timeout is 1 s. The exchange with a receiver that never answers ends after the
// input's 1 s, inside the activity's StartToClose, so each scheduled attempt POSTs exactly once
// instead of the activity timing out and POSTing the same attempt again and again.
func TestAttemptTimeoutComesFromTheWorkflowInput(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, noWorker: true, timeout: time.Second, schedule: []time.Duration{time.Second}})
	st.stopWorker = st.startWorker(t, st.box, st.policy, time.Minute, st.logger)
	hang := startHangingReceiver(t)
	id, _ := st.createWebhook(t, "A", hang.srv.URL+"/never-answers", "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", sampleData["campaign.created"])

	if !within(30*time.Second, func() bool { return st.delivery(t, eventID, id).State == model.DeliveryExhausted }) {
		st.dumpDelivery(t, eventID, id)
		t.Fatal("timed out after 30s waiting for both attempts to time out")
	}
	page, err := model.ReadDeliveries(t.Context(), st.db, model.DeliveryQuery{WebhookID: id, Limit: 10, Order: model.NewestFirst, Include: model.IncludeAttempts})
	if err != nil || len(page.Views) != 1 {
		t.Fatalf("deliveries: %v %v", page, err)
	}
	views := page.Views
	if got := len(views[0].Log); got != 2 {
		t.Fatalf("%d attempts recorded, want 2", got)
	}
	for _, a := range views[0].Log {
		if a.ErrorClass == nil || *a.ErrorClass != "timeout" || a.LatencyMS > 5000 {
			t.Errorf("attempt %d: class %v after %d ms, want a timeout after about 1 s", a.Attempt, a.ErrorClass, a.LatencyMS)
		}
	}
	if requests, _ := hang.stats(); requests != 2 {
		t.Fatalf("receiver got %d POSTs, want one per attempt (2)", requests)
	}
}

// TestDeleteWebhookCancelsWaitingDeliveries: an exhausted delivery waits in its retry window;
// deleting its webhook ends the workflow as canceled at once (not after the window), with its
// delivery and DeliveryState canceled.
func TestDeleteWebhookCancelsWaitingDeliveries(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{500 * time.Millisecond}})
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	id, _ := st.createWebhook(t, "A", st.rc.url("/down"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", sampleData["campaign.created"])
	st.waitIdle(t, eventID, id, model.DeliveryExhausted)

	status, body, _ := st.call(t, "A", "DELETE", fmt.Sprintf("%s/webhooks/%d", collection("A"), id), nil)
	if status != http.StatusOK {
		t.Fatalf("delete: %d %v", status, body)
	}
	wfID := workflows.DeliveryWorkflowID(eventID, id)
	eventually(t, 10*time.Second, wfID+" canceled", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		return err == nil && desc.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_CANCELED
	})
	eventually(t, 10*time.Second, "DeliveryState canceled", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		if err != nil {
			return false
		}
		var state string
		p := desc.WorkflowExecutionInfo.SearchAttributes.GetIndexedFields()["DeliveryState"]
		return p != nil && converter.GetDefaultDataConverter().FromPayload(p, &state) == nil && state == model.DeliveryCanceled
	})
	if d := st.delivery(t, eventID, id); d.State != model.DeliveryCanceled {
		t.Fatalf("delivery state %s, want %s", d.State, model.DeliveryCanceled)
	}
}

// TestRetryAfterRetryWindow: once an exhausted delivery's workflow has ended with its retry window,
// the API's retry starts a new run of it, says it retried one delivery, and the new run delivers
// with its attempts numbered on from the first run's.
func TestRetryAfterRetryWindow(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{500 * time.Millisecond}, retryWindow: time.Second})
	st.rc.setRespond(func(n int, _ string, w http.ResponseWriter) {
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	id, _ := st.createWebhook(t, "A", st.rc.url("/late"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", sampleData["campaign.created"])
	wfID := workflows.DeliveryWorkflowID(eventID, id)
	eventually(t, 30*time.Second, wfID+" ended with its retry window", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		return err == nil && desc.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	if d := st.delivery(t, eventID, id); d.State != model.DeliveryExhausted {
		t.Fatalf("delivery state %s, want %s", d.State, model.DeliveryExhausted)
	}

	status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("%s/webhooks/%d/retry", collection("A"), id), nil)
	if status != http.StatusAccepted {
		t.Fatalf("retry: %d %v", status, body)
	}
	if got := body["data"].(map[string]any)["retried"]; got != float64(1) {
		t.Fatalf("retried = %v, want 1 (%v)", got, body)
	}
	eventually(t, 30*time.Second, "delivered by the new run", func() bool { return st.delivery(t, eventID, id).State == model.DeliveryDelivered })
	page, err := model.ReadDeliveries(t.Context(), st.db, model.DeliveryQuery{WebhookID: id, Limit: 10, Order: model.NewestFirst, Include: model.IncludeAttempts})
	if err != nil || len(page.Views) != 1 {
		t.Fatalf("deliveries: %v %v", page, err)
	}
	views := page.Views
	var numbers []int
	for _, a := range views[0].Log {
		numbers = append(numbers, a.Attempt)
	}
	if !slices.Equal(numbers, []int{1, 2, 3}) || views[0].Attempts != 3 {
		t.Fatalf("attempt log %v (attempts %d), want 1, 2, 3", numbers, views[0].Attempts)
	}
	if n := len(st.rc.requests("/late")); n != 3 {
		t.Fatalf("receiver got %d requests, want 3", n)
	}
}

// TestUnreadableSecretEndsDeliveryVisibly: a webhook secret the current WEBHOOKD_SECRET_KEY cannot
// open is not retried forever: the delivery is exhausted with the reason, its workflow fails, the
// internal failure is counted. Once the secret is readable again, the API's retry starts a new run
// that delivers.
func TestUnreadableSecretEndsDeliveryVisibly(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	id, _ := st.createWebhook(t, "A", st.rc.url("/sealed"), "campaign.created")
	good := st.webhook(t, id).Secret
	other, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, foreign, err := other.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	setSecret := func(sealed string) {
		t.Helper()
		if _, err := st.db.NewUpdate().Model((*model.Webhook)(nil)).Set("secret = ?", sealed).Where("id = ?", id).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	setSecret(foreign)
	eventID := st.publish(t, "A", "campaign.created", sampleData["campaign.created"])
	wfID := workflows.DeliveryWorkflowID(eventID, id)
	eventually(t, 30*time.Second, wfID+" failed", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), wfID, "")
		return err == nil && desc.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_FAILED
	})
	d := st.delivery(t, eventID, id)
	if d.State != model.DeliveryExhausted || d.LastError == nil || !strings.Contains(*d.LastError, "WEBHOOKD_SECRET_KEY") {
		t.Fatalf("delivery %s, last error %v; want exhausted naming WEBHOOKD_SECRET_KEY", d.State, d.LastError)
	}
	families, err := st.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, f := range families {
		if f.GetName() == "webhookd_delivery_internal_failures_total" {
			for _, m := range f.GetMetric() {
				counted += m.GetCounter().GetValue()
			}
		}
	}
	if counted != 1 {
		t.Fatalf("webhookd_delivery_internal_failures_total = %v, want 1", counted)
	}
	if n := len(st.rc.requests("/sealed")); n != 0 {
		t.Fatalf("receiver got %d requests, want none", n)
	}

	setSecret(good) // the operator restored the key
	status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("%s/webhooks/%d/retry", collection("A"), id), nil)
	if status != http.StatusAccepted || body["data"].(map[string]any)["retried"] != float64(1) {
		t.Fatalf("retry: %d %v", status, body)
	}
	eventually(t, 30*time.Second, "delivered after the retry", func() bool { return st.delivery(t, eventID, id).State == model.DeliveryDelivered })
}

// dumpDelivery logs what a delivery that did not end as expected looks like: its row, its attempts
// and its workflow's pending activities, for a failure that needs explaining.
func (st *stack) dumpDelivery(t *testing.T, eventID, webhookID int64) {
	t.Helper()
	t.Logf("delivery: %+v", st.delivery(t, eventID, webhookID))
	log, err := st.attempts(webhookID)
	for _, a := range log {
		t.Logf("attempt %d at %s: status %v, class %v, %v, latency %d ms", a.Attempt, a.StartedAt.Format(time.RFC3339Nano),
			deref(a.StatusCode), deref(a.ErrorClass), deref(a.Error), a.LatencyMS)
	}
	if err != nil {
		t.Logf("attempts: %v", err)
	}
	desc, err := st.tc.DescribeWorkflowExecution(context.Background(), workflows.DeliveryWorkflowID(eventID, webhookID), "")
	if err != nil {
		t.Logf("describe: %v", err)
		return
	}
	t.Logf("workflow: %v, pending workflow task %v", desc.WorkflowExecutionInfo.GetStatus(), desc.PendingWorkflowTask)
	for _, a := range desc.PendingActivities {
		t.Logf("pending activity %s: state %v, attempt %d, last failure %v, scheduled %v, last started %v",
			a.ActivityType.GetName(), a.State, a.Attempt, a.LastFailure.GetMessage(), a.ScheduledTime.AsTime(), a.LastStartedTime.AsTime())
	}
}
