//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

// TestResendRecoverRevoke runs what a user of Svix or Stripe expects on the real stack: a delivered
// delivery sent again (through the API, then through the operator's command) reaches the receiver
// again with the same webhook-id; a recovery since a time delivers again exactly the deliveries
// that failed in that window; the Web UI's summaries tell each attempt's outcome without the URL;
// and a revoked key answers 401 on its next call.
func TestResendRecoverRevoke(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}})
	var failing atomic.Bool
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/recover" && failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	bin := webhookdBinary(t)
	tsrv := temporaltest.Start(t)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "WEBHOOKD_DATABASE_URL="+st.dbURL, "TEMPORAL_ADDRESS="+tsrv.Address,
			"TEMPORAL_NAMESPACE="+tsrv.Namespace, "WEBHOOKD_TASK_QUEUE="+st.queue, "WEBHOOKD_LOG_LEVEL=warn")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("webhookd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return lines[len(lines)-1]
	}

	// A delivered delivery, sent again through the API, then through `webhookd webhooks retry`.
	hook, _ := st.createWebhook(t, "A", st.rc.url("/resend"), "campaign.created")
	ev := st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "first delivery", func() bool { return st.delivery(t, ev, hook).State == model.DeliveryDelivered })
	d := st.delivery(t, ev, hook)
	path := fmt.Sprintf("/api/svc/v2/webhooks/%d/deliveries/%d", hook, d.ID)
	if status, body, _ := st.call(t, "A", "POST", path+"/retry", nil); status != http.StatusAccepted {
		t.Fatalf("resend: %d %v", status, body)
	}
	resent := func(n int) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("%d receipts", n), func() bool {
			got := st.delivery(t, ev, hook)
			return len(st.rc.requests("/resend")) == n && got.State == model.DeliveryDelivered && got.Attempts == n
		})
		for _, r := range st.rc.requests("/resend") {
			if id := r.Header.Get("Webhook-Id"); id != wire.MessageID(ev, hook) {
				t.Fatalf("a receipt carried webhook-id %q, want %q on every one", id, wire.MessageID(ev, hook))
			}
		}
	}
	resent(2)
	if got := cli("webhooks", "retry", fmt.Sprint(hook), "--delivery", fmt.Sprint(d.ID)); got != fmt.Sprint(d.ID) {
		t.Fatalf("webhooks retry --delivery printed %q last, want the delivery id", got)
	}
	resent(3)
	// The delivery log shows what each attempt sent, without its signature.
	_, detail, _ := st.call(t, "A", "GET", path, nil)
	log := detail["data"].(map[string]any)["attemptLog"].([]any)
	if len(log) != 3 {
		t.Fatalf("attempt log = %v, want 3 attempts", log)
	}
	for _, a := range log {
		h := a.(map[string]any)["requestHeaders"].(map[string]any)
		if h["Webhook-Id"] != wire.MessageID(ev, hook) || h["X-Service-Event"] != "campaign.created" || h["Webhook-Signature"] != nil {
			t.Fatalf("attempt headers = %v", h)
		}
	}

	// A recovery since T: e1 failed before T, e2 and e3 after it, e4 was delivered.
	rhook, _ := st.createWebhook(t, "A", st.rc.url("/recover")+"?token=s3cret", "campaign.updated")
	failing.Store(true)
	e1 := st.publish(t, "A", "campaign.updated", campaign)
	st.waitIdle(t, e1, rhook, model.DeliveryExhausted)
	since := time.Now().UTC()
	e2 := st.publish(t, "A", "campaign.updated", campaign)
	e3 := st.publish(t, "A", "campaign.updated", campaign)
	st.waitIdle(t, e2, rhook, model.DeliveryExhausted)
	st.waitIdle(t, e3, rhook, model.DeliveryExhausted)
	failing.Store(false)
	e4 := st.publish(t, "A", "campaign.updated", campaign)
	eventually(t, 30*time.Second, "e4 delivered", func() bool { return st.delivery(t, e4, rhook).State == model.DeliveryDelivered })
	receipts := func(eventID int64) int {
		n := 0
		for _, r := range st.rc.requests("/recover") {
			if r.Header.Get("Webhook-Id") == wire.MessageID(eventID, rhook) {
				n++
			}
		}
		return n
	}
	before := map[int64]int{e1: receipts(e1), e2: receipts(e2), e3: receipts(e3), e4: receipts(e4)}

	status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/recover", rhook), map[string]string{"since": since.Format(time.RFC3339Nano)})
	if status != http.StatusAccepted || body["data"].(map[string]any)["queued"] != float64(2) {
		t.Fatalf("recover: %d %v, want 202 with 2 queued", status, body)
	}
	for _, e := range []int64{e2, e3} {
		eventually(t, 30*time.Second, fmt.Sprintf("event %d recovered", e), func() bool { return st.delivery(t, e, rhook).State == model.DeliveryDelivered })
		if got := receipts(e); got != before[e]+1 {
			t.Errorf("event %d reached the receiver %d times, want %d (one more)", e, got, before[e]+1)
		}
	}
	st.waitIdle(t, e1, rhook, model.DeliveryExhausted) // before the window: left alone
	if receipts(e1) != before[e1] || receipts(e4) != before[e4] {
		t.Errorf("receipts of e1 and e4 went from %d, %d to %d, %d; the recovery must leave them alone", before[e1], before[e4], receipts(e1), receipts(e4))
	}
	// The operator's command: nothing failed since then.
	if got := cli("webhooks", "recover", fmt.Sprint(rhook), "--since", since.Format(time.RFC3339Nano)); got != "0" {
		t.Fatalf("webhooks recover printed %q last, want 0", got)
	}

	// The Web UI's view of e2: the workflow names the event type and the host, and each attempt's
	// outcome is in a summary; nothing shows the URL's path or query.
	checkSummaries(t, st, workflows.DeliveryWorkflowID(e2, rhook), "campaign.updated to "+strings.TrimPrefix(st.rc.url(""), "https://"),
		"attempt 1", "attempt 1: 500 from receiver; attempt 2 in", "attempt 2: 500 from receiver; no attempts left", "exhausted: waiting")

	// A key issued and revoked with the operator's commands answers 401 on its next call.
	key := cli("apikey", "create", "--owner-email", "revoke@example.com")
	get := func() int {
		req, _ := http.NewRequest("GET", st.apiURL+"/api/svc/v2/webhooks", nil)
		req.Header.Set("x-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(); got != http.StatusOK {
		t.Fatalf("a new key answers %d, want 200", got)
	}
	var keyID string
	cmd := exec.Command(bin, "apikey", "list", "--owner-email", "revoke@example.com")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATABASE_URL="+st.dbURL)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Split(line, "\t"); len(f) > 1 && strings.HasPrefix(key, strings.TrimSuffix(f[1], "...")) {
			keyID = f[0]
		}
	}
	if got := cli("apikey", "revoke", keyID); got != keyID {
		t.Fatalf("apikey revoke printed %q last, want the key id %s", got, keyID)
	}
	if got := get(); got != http.StatusUnauthorized {
		t.Fatalf("a revoked key answers %d, want 401", got)
	}
}

// checkSummaries checks what the Web UI shows of a delivery workflow: its summary line, and the
// summaries of its history's events, which must include each of want (as prefixes, in order) and
// never the URL's path or query.
func checkSummaries(t *testing.T, st *stack, workflowID, summary string, want ...string) {
	t.Helper()
	ctx := context.Background()
	dc := converter.GetDefaultDataConverter()
	desc, err := st.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := dc.FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &got); err != nil || got != summary {
		t.Fatalf("workflow summary = %q (%v), want %q", got, err, summary)
	}
	var summaries []string
	it := st.tc.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p := ev.GetUserMetadata().GetSummary(); p != nil {
			var s string
			if err := dc.FromPayload(p, &s); err != nil {
				t.Fatal(err)
			}
			summaries = append(summaries, s)
		}
	}
	next := 0
	for _, s := range summaries {
		if strings.Contains(s, "/recover") || strings.Contains(s, "token") {
			t.Fatalf("summary %q shows the URL", s)
		}
		if next < len(want) && strings.HasPrefix(s, want[next]) {
			next++
		}
	}
	if next < len(want) {
		t.Fatalf("history summaries = %q\nwant, in order, ones starting with %q", summaries, want)
	}
}
