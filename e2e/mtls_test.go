//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestReceiverMTLS (issue 31, part 3) runs the built binary at debug level, with tracing on,
// against a receiver whose certificate a private CA signed (which the stack does not trust) and
// that requires a client certificate from another private CA. A webhook created through the API
// with that CA and a client certificate and key has its test event and 10 published events
// delivered, each with the client certificate. The private key (its PEM and its base64 body)
// appears nowhere in the delivery log's API answers, the attempt log, the deliveries' Temporal
// histories, webhookd's log or a span.
func TestReceiverMTLS(t *testing.T) {
	st := startTracedStack(t, "WEBHOOKD_LOG_LEVEL=debug", "OTEL_BSP_SCHEDULE_DELAY=100")
	now := time.Now()
	serverCA := egresstest.NewCA(t, "e2e Receiver CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	clientCA := egresstest.NewCA(t, "e2e Client CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	client := clientCA.Client(t, "webhookd-e2e", now.Add(-time.Hour), now.Add(24*time.Hour))

	var served, withCert atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if len(r.TLS.PeerCertificates) > 0 && r.TLS.PeerCertificates[0].Subject.CommonName == "webhookd-e2e" {
			withCert.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCA.Server(t).TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool()}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	status, body, _ := st.call(t, "B", "POST", "/v2/svc/v2/webhooks", map[string]any{
		"url": srv.URL + "/mtls", "eventType": "lead.captured",
		"tls": map[string]any{"caCert": serverCA.CertPEM, "clientCert": client.CertPEM, "clientKey": client.KeyPEM},
	})
	if status != http.StatusCreated {
		t.Fatalf("create a webhook with tls: %d %v", status, body)
	}
	created := body["data"].(map[string]any)
	if got, _ := json.Marshal(created["tls"]); !strings.Contains(string(got), `"clientKey":"••••••••"`) || !strings.Contains(string(got), "CN=webhookd-e2e") {
		t.Fatalf("create shows tls %s", got)
	}
	hook := int64(created["id"].(float64))

	var events []int64
	for range 10 {
		events = append(events, st.publish(t, "B", "lead.captured", maps.Clone(sampleData["lead.captured"].(map[string]any))))
	}
	for _, eventID := range events {
		st.waitDelivered(t, eventID)
	}
	eventually(t, 30*time.Second, "the test event delivered", func() bool {
		n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("webhook_id = ? AND state = ?", hook, model.DeliveryDelivered).Count(context.Background())
		return err == nil && n == 11
	})
	if s, c := served.Load(), withCert.Load(); s != 11 || c != 11 {
		t.Fatalf("the receiver served %d requests, %d with the client certificate; want 11 and 11", s, c)
	}

	block, _ := pem.Decode([]byte(client.KeyPEM))
	secrets := map[string]string{
		"the key's PEM":              strings.TrimSpace(client.KeyPEM),
		"the key's PEM body":         egresstest.KeyBody(client.KeyPEM),
		"the key's base64, one line": base64.StdEncoding.EncodeToString(block.Bytes),
	}
	check := func(where, text string, known ...string) {
		t.Helper()
		secretsAbsent(t, where, text, secrets, known...)
	}

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
	get("/v2/svc/v2/webhooks")
	list := get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries?limit=100", hook))
	deliveries, _ := list["data"].([]any)
	if len(deliveries) == 0 {
		t.Fatalf("the delivery log lists no delivery: %v", list)
	}
	for _, d := range deliveries[:min(3, len(deliveries))] {
		get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries/%.0f", hook, d.(map[string]any)["id"].(float64)))
	}
	// The account's delivery log across webhooks and its audit log (issue 46), which records the
	// webhook's settings with its key.
	get(fmt.Sprintf("/v2/svc/v2/deliveries?webhookId=%d&limit=100", hook))
	check("the audit log's answer", string(mustJSON(t, get("/v2/svc/v2/audit-log?limit=100"))), `"webhook.`)
	check("the delivery log's answers", answers.String(), `"clientKey":"••••••••"`, `"attempts"`)

	var attempts []string
	if err := st.db.NewSelect().Model((*model.Attempt)(nil)).ColumnExpr("concat(coalesce(request_headers, ''), coalesce(error, ''), coalesce(response_body, ''))").
		Where("delivery_id IN (SELECT id FROM deliveries WHERE webhook_id = ?)", hook).Scan(context.Background(), &attempts); err != nil || len(attempts) != 11 {
		t.Fatalf("attempt log: %d rows, %v; want 11", len(attempts), err)
	}
	check("the attempt log", strings.Join(attempts, "\n"), `"Content-Type"`)

	tc := temporaltest.Start(t).Client(t)
	var ids []string
	for _, eventID := range events {
		ids = append(ids, workflows.DeliveryWorkflowID(eventID, hook))
	}
	check("the deliveries' workflow histories", historyText(t, tc, ids...), `"EventType":"lead.captured"`)

	// Give the last attempts' records and spans a moment to land.
	time.Sleep(time.Second)
	check("webhookd's log", st.proc.logs(t), "route=/v2/svc/v2/events")
	check("webhookd's /metrics", st.proc.metricsText(t), "webhookd_deliveries_total")
	var spans strings.Builder
	for _, s := range st.collector.Spans() {
		fmt.Fprintf(&spans, "%s %v %v %v\n", s.Name, s.Attributes, s.Resource, s.Events)
	}
	check("the spans", spans.String(), "RunActivity:Deliver")
}
