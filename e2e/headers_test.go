//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestWebhookHeaders (issue 31) runs the built binary at debug level, with tracing on: a webhook
// created with its own X-Api-Token header, a receiver that answers 401 unless that header holds the
// configured value. The registration's test event and a published event are delivered at their
// first attempt; the API and the attempt log show the header by name with its value redacted; the
// value appears nowhere in the delivery log's API answers, the attempt log, the delivery
// workflow's Temporal history, webhookd's log or a span.
func TestWebhookHeaders(t *testing.T) {
	st := startTracedStack(t, "WEBHOOKD_LOG_LEVEL=debug", "OTEL_BSP_SCHEDULE_DELAY=100")
	random := make([]byte, 16)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	token := "e2e-token-" + hex.EncodeToString(random)
	redacted := "••••" + token[len(token)-4:]
	const path = "/headers"
	st.rc.setRespond(func(n int, path string, w http.ResponseWriter) {
		if st.rc.requests(path)[n-1].Header.Get("X-Api-Token") != token {
			w.WriteHeader(http.StatusUnauthorized)
		}
	})

	status, body, _ := st.call(t, "B", "POST", "/v2/svc/v2/webhooks", map[string]any{
		"url": st.rc.url(path), "eventType": "lead.captured", "headers": map[string]string{"X-Api-Token": token},
	})
	if status != http.StatusCreated {
		t.Fatalf("create a webhook with headers: %d %v", status, body)
	}
	created := body["data"].(map[string]any)
	hook := int64(created["id"].(float64))
	if h, _ := created["headers"].(map[string]any); h["X-Api-Token"] != redacted {
		t.Fatalf("create shows headers %v, want X-Api-Token %s", created["headers"], redacted)
	}

	eventID := st.publish(t, "B", "lead.captured", maps.Clone(sampleData["lead.captured"].(map[string]any)))
	st.waitDelivered(t, eventID)
	eventually(t, 30*time.Second, "the test event delivered", func() bool {
		n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("webhook_id = ? AND state = ?", hook, model.DeliveryDelivered).Count(context.Background())
		return err == nil && n == 2
	})
	reqs := st.rc.requests(path)
	if len(reqs) != 2 {
		t.Fatalf("the receiver got %d requests, want 2 (the test event and the event), each at its first attempt", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("X-Api-Token") != token || r.Header.Get("Webhook-Signature") == "" {
			t.Fatalf("a request without the webhook's header or the signature: %v", r.Header)
		}
	}

	// check searches text for the value; known, a string text must hold, proves that the search
	// reads what it claims to.
	secrets := map[string]string{"the header's value": token, "the header's value, base64": base64.StdEncoding.EncodeToString([]byte(token))}
	check := func(where, text, known string) {
		t.Helper()
		secretsAbsent(t, where, text, secrets, known)
	}

	// The delivery log, as the API answers it: the list and each delivery with its attempts.
	var answers strings.Builder
	get := func(p string) map[string]any {
		t.Helper()
		status, body, _ := st.call(t, "B", "GET", p, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", p, status, body)
		}
		raw, _ := json.Marshal(body)
		answers.Write(raw)
		return body
	}
	get(fmt.Sprintf("/v2/svc/v2/webhooks/%d", hook))
	list := get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries", hook))
	deliveries, _ := list["data"].([]any)
	if len(deliveries) != 2 {
		t.Fatalf("the delivery log lists %d deliveries, want 2: %v", len(deliveries), list)
	}
	for _, d := range deliveries {
		get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries/%.0f", hook, d.(map[string]any)["id"].(float64)))
	}
	// The account's delivery log across webhooks and its audit log (issue 46), which records the
	// webhook's creation with its headers.
	get(fmt.Sprintf("/v2/svc/v2/deliveries?webhookId=%d", hook))
	check("the audit log's answer", string(mustJSON(t, get("/v2/svc/v2/audit-log?limit=100"))), `"webhook.create"`)
	check("the delivery log's answers", answers.String(), `"X-Api-Token":"`+redacted+`"`)

	var headers []string
	if err := st.db.NewSelect().Model((*model.Attempt)(nil)).Column("request_headers").
		Where("delivery_id IN (SELECT id FROM deliveries WHERE webhook_id = ?)", hook).Scan(context.Background(), &headers); err != nil || len(headers) != 2 {
		t.Fatalf("attempt log: %d rows, %v", len(headers), err)
	}
	check("the attempt log", strings.Join(headers, "\n"), `"X-Api-Token":"`+redacted+`"`)

	tc := temporaltest.Start(t).Client(t)
	check("the delivery workflow's history", historyText(t, tc, workflows.DeliveryWorkflowID(eventID, hook)), `"EventType":"lead.captured"`)

	// Give the last attempt's records and spans a moment to land.
	time.Sleep(time.Second)
	check("webhookd's log", st.proc.logs(t), "route=/v2/svc/v2/events")
	check("webhookd's /metrics", st.proc.metricsText(t), "webhookd_deliveries_total")
	var spans strings.Builder
	for _, s := range st.collector.Spans() {
		fmt.Fprintf(&spans, "%s %v %v %v\n", s.Name, s.Attributes, s.Resource, s.Events)
	}
	check("the spans", spans.String(), "RunActivity:Deliver")
}
