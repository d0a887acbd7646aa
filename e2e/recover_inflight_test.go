//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRecoverCoversAttemptsInFlight is issue 41's first defect: a recovery asked while a delivery's
// last attempt is at the receiver covers it. That delivery is counted in `queued` and, when the
// attempt fails, runs its schedule again; one whose attempt in flight succeeds is not sent again.
// Before the fix the recovery counted only exhausted and retrying deliveries: `queued` was 2, and
// the third delivery, exhausted a moment later, was never retried.
func TestRecoverCoversAttemptsInFlight(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{}, timeout: 30 * time.Second})
	held := make(chan struct{}, 2)
	release := make(chan struct{})
	st.rc.setRespond(func(n int, path string, w http.ResponseWriter) {
		switch {
		case path == "/fail" && n == 3, path == "/ok" && n == 1:
			held <- struct{}{}
			<-release
		}
		if path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	receipts := st.rc.receipts
	recoverSince := func(hook int64, since time.Time) (float64, string) {
		t.Helper()
		status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/recover", hook),
			map[string]string{"since": since.Format(time.RFC3339Nano)})
		data, _ := body["data"].(map[string]any)
		if status != http.StatusAccepted || data == nil {
			t.Fatalf("recover answered %d %v", status, body)
		}
		queued, _ := data["queued"].(float64)
		wf, _ := data["workflowId"].(string)
		return queued, wf
	}

	since := time.Now().UTC()
	fail, _ := st.createWebhook(t, "A", st.rc.url("/fail"), "campaign.updated")
	ok, _ := st.createWebhook(t, "A", st.rc.url("/ok"), "campaign.created")
	var events []int64
	for range 2 {
		ev := st.publish(t, "A", "campaign.updated", campaign)
		st.waitSettled(t, ev, fail, model.DeliveryExhausted)
		events = append(events, ev)
	}
	// The third delivery's one attempt is at the receiver, and so is the first of the other
	// webhook's.
	events = append(events, st.publish(t, "A", "campaign.updated", campaign))
	inFlight := st.publish(t, "A", "campaign.created", campaign)
	for range 2 {
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatal("the attempts to hold never reached the receiver")
		}
	}
	queuedFail, wfFail := recoverSince(fail, since)
	queuedOK, wfOK := recoverSince(ok, since)
	t.Logf("recoveries asked with an attempt in flight: queued %v of 3 failing, %v of 1 that succeeds", queuedFail, queuedOK)
	if queuedFail != 3 {
		t.Errorf("the recovery queued %v deliveries, want 3 (two exhausted, one with its last attempt in flight)", queuedFail)
	}
	if queuedOK != 1 {
		t.Errorf("the recovery queued %v deliveries, want 1 (its attempt in flight)", queuedOK)
	}
	close(release)

	ctx := context.Background()
	for _, wf := range []string{wfFail, wfOK} {
		if wf == "" {
			continue
		}
		if err := st.tc.GetWorkflow(ctx, wf, "").Get(ctx, nil); err != nil {
			t.Fatalf("recovery %s: %v", wf, err)
		}
	}
	// Each failing delivery reaches the receiver once more: the third too, after its attempt in
	// flight failed.
	for _, ev := range events {
		eventually(t, 60*time.Second, fmt.Sprintf("event %d retried", ev), func() bool { return receipts("/fail", ev, fail) >= 2 })
		st.waitSettled(t, ev, fail, model.DeliveryExhausted)
		if got := receipts("/fail", ev, fail); got != 2 {
			t.Errorf("event %d reached the failing receiver %d times, want 2 (its attempt, then the recovery's)", ev, got)
		}
	}
	// The delivery whose attempt in flight succeeded is delivered once, and its workflow ends.
	if err := st.tc.GetWorkflow(ctx, workflows.DeliveryWorkflowID(inFlight, ok), "").Get(ctx, nil); err != nil {
		t.Fatalf("the delivered delivery's workflow: %v", err)
	}
	if d := st.delivery(t, inFlight, ok); d.State != model.DeliveryDelivered || d.Attempts != 1 {
		t.Errorf("the delivery that succeeded in flight is %s after %d attempts, want delivered after 1", d.State, d.Attempts)
	}
	if got := receipts("/ok", inFlight, ok); got != 1 {
		t.Errorf("the delivery that succeeded in flight reached the receiver %d times, want once", got)
	}
}
