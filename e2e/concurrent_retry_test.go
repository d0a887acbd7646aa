//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

// TestConcurrentResendsAndRecovers is issue 18's "repeated requests agree" and "resend is bounded"
// on the real stack, against a receiver that always fails and a schedule without retries (each run
// of a delivery is one attempt, then it waits, exhausted, for a retry):
//   - 50 concurrent resends of one exhausted delivery reach the receiver at most twice: the
//     attempt they asked for, and at most one more for those that came in while it ran;
//   - 20 concurrent identical recoveries answer the same count and workflow, and each delivery
//     they cover reaches the receiver exactly once more.
func TestConcurrentResendsAndRecovers(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{}})
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	receipts := st.rc.receipts

	// 50 resends of one exhausted delivery.
	hook, _ := st.createWebhook(t, "A", st.rc.url("/resend"), "campaign.failed")
	ev := st.publish(t, "A", "campaign.failed", campaign)
	st.waitSettled(t, ev, hook, model.DeliveryExhausted)
	d := st.delivery(t, ev, hook)
	before := receipts("/resend", ev, hook)
	answers := concurrently(t, st, 50, "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/deliveries/%d/retry", hook, d.ID), nil)
	for _, a := range answers {
		if a.status != http.StatusAccepted {
			t.Fatalf("a resend answered %d %s", a.status, a.body)
		}
	}
	// Every signal is in; once the workflow has handled them all and waits again, nothing more
	// is coming.
	st.waitSettled(t, ev, hook, model.DeliveryExhausted)
	posts := receipts("/resend", ev, hook) - before
	t.Logf("50 concurrent resends: %d POSTs to the receiver", posts)
	if posts < 1 || posts > 2 {
		t.Errorf("50 concurrent resends of one exhausted delivery made %d POSTs, want 1 or 2", posts)
	}
	if got := st.delivery(t, ev, hook); got.Attempts != 1+posts {
		t.Errorf("the delivery counts %d attempts, want %d", got.Attempts, 1+posts)
	}

	// 20 identical recoveries of 50 exhausted deliveries.
	rhook, _ := st.createWebhook(t, "A", st.rc.url("/recover"), "campaign.updated")
	since := time.Now().UTC()
	var events []int64
	for range 50 {
		events = append(events, st.publish(t, "A", "campaign.updated", campaign))
	}
	beforeRecovery := map[int64]int{}
	for _, e := range events {
		st.waitSettled(t, e, rhook, model.DeliveryExhausted)
		beforeRecovery[e] = receipts("/recover", e, rhook)
	}
	answers = concurrently(t, st, 20, "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/recover", rhook), map[string]string{"since": since.Format(time.RFC3339Nano)})
	wantID := workflows.RecoverWorkflowID(rhook, since, time.Time{})
	counts := map[string]int{}
	for _, a := range answers {
		data, _ := a.body["data"].(map[string]any)
		if a.status != http.StatusAccepted || data == nil {
			t.Fatalf("a recovery answered %d %v", a.status, a.body)
		}
		counts[fmt.Sprintf("queued %v, until %v, workflowId %v", data["queued"], data["until"], data["workflowId"])]++
		if data["queued"] != float64(len(events)) || data["workflowId"] != wantID {
			t.Errorf("a recovery answered %v, want queued %d and workflowId %s", data, len(events), wantID)
		}
	}
	t.Logf("20 concurrent recoveries answered: %v", counts)
	if len(counts) != 1 {
		t.Errorf("20 identical recoveries answered %d different ways: %v", len(counts), counts)
	}
	if err := st.tc.GetWorkflow(context.Background(), wantID, "").Get(context.Background(), nil); err != nil {
		t.Fatalf("recovery %s: %v", wantID, err)
	}
	for _, e := range events {
		st.waitSettled(t, e, rhook, model.DeliveryExhausted)
		if got := receipts("/recover", e, rhook); got != beforeRecovery[e]+1 {
			t.Errorf("event %d reached the receiver %d times more after the recoveries, want once", e, got-beforeRecovery[e])
		}
	}
}

// receipts counts the requests on path that carried the delivery of event eventID to webhook
// hookID (its webhook-id).
func (rc *receiver) receipts(path string, eventID, hookID int64) int {
	n := 0
	for _, r := range rc.requests(path) {
		if r.Header.Get("Webhook-Id") == wire.MessageID(eventID, hookID) {
			n++
		}
	}
	return n
}

type answer struct {
	status int
	body   map[string]any
}

// concurrently makes n identical API calls at once (variant A), released together, and returns
// their answers.
func concurrently(t *testing.T, st *stack, n int, method, path string, body any) []answer {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	out := make([]answer, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequest(method, st.apiURL+path, bytes.NewReader(raw))
			if err != nil {
				errs[i] = err
				return
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("x-api-key", st.key)
			<-start
			resp, err := client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			out[i].status = resp.StatusCode
			if err := json.Unmarshal(b, &out[i].body); err != nil {
				errs[i] = fmt.Errorf("%d %s: %w", resp.StatusCode, b, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// waitSettled is waitIdle, and also waits until the workflow has no workflow task pending: every
// signal it got has been handled, so nothing more will happen until it gets another.
func (st *stack) waitSettled(t *testing.T, eventID, webhookID int64, state string) {
	t.Helper()
	st.waitQuiet(t, eventID, webhookID, state, true)
}
