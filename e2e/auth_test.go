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

// TestReceiverAuth (issue 31, part 2) runs the built binary at debug level, with tracing on: one
// receiver that requires Basic credentials, one that requires a Bearer token issued by a local
// token endpoint (the client-credentials grant, with an audience). Both webhooks' test events and
// 20 published events are delivered at their first attempt, with one token request for all of the
// OAuth2 webhook's deliveries. The password, the client secret and the token appear nowhere in
// the delivery log's API answers, the attempt log, the deliveries' Temporal histories, webhookd's
// log or a span.
func TestReceiverAuth(t *testing.T) {
	besideOthers(t)
	st := startTracedStack(t, "WEBHOOKD_LOG_LEVEL=debug", "OTEL_BSP_SCHEDULE_DELAY=100")
	secret := func(prefix string) string {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return prefix + hex.EncodeToString(b)
	}
	password, clientSecret, token := secret("e2e-password-"), secret("e2e-client-secret-"), secret("e2e-access-token-")
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook-user:"+password))
	client := "Basic " + base64.StdEncoding.EncodeToString([]byte("hook-client:"+clientSecret))
	st.rc.setRespond(func(n int, path string, w http.ResponseWriter) {
		r := st.rc.requests(path)[n-1]
		switch path {
		case "/token":
			if r.Header.Get("Authorization") != client || !strings.Contains(string(r.Body), "grant_type=client_credentials") ||
				!strings.Contains(string(r.Body), "audience=https%3A%2F%2Fapi.example.com") {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
		case "/basic":
			if r.Header.Get("Authorization") != basic {
				w.WriteHeader(http.StatusUnauthorized)
			}
		case "/bearer":
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}
	})

	create := func(path string, auth map[string]any, shown string) int64 {
		t.Helper()
		status, body, _ := st.call(t, "B", "POST", "/v2/svc/v2/webhooks", map[string]any{
			"url": st.rc.url(path), "eventType": "lead.captured", "auth": auth,
		})
		if status != http.StatusCreated {
			t.Fatalf("create a webhook with auth: %d %v", status, body)
		}
		created := body["data"].(map[string]any)
		if got, _ := json.Marshal(created["auth"]); !strings.Contains(string(got), shown) {
			t.Fatalf("create shows auth %s, want %s in it", got, shown)
		}
		return int64(created["id"].(float64))
	}
	basicHook := create("/basic", map[string]any{"type": "basic", "username": "hook-user", "password": password},
		`"password":"••••••••"`)
	bearerHook := create("/bearer", map[string]any{"type": "oauth2", "tokenUrl": st.rc.url("/token"), "clientId": "hook-client",
		"clientSecret": clientSecret, "scopes": []string{"webhooks.write"}, "audience": "https://api.example.com"}, `"clientSecret":"••••••••"`)

	var events []int64
	for range 20 {
		eventID := st.publish(t, "B", "lead.captured", maps.Clone(sampleData["lead.captured"].(map[string]any)))
		events = append(events, eventID)
	}
	for _, eventID := range events {
		st.waitDelivered(t, eventID)
	}
	for _, hook := range []int64{basicHook, bearerHook} {
		eventually(t, 30*time.Second, "the test event delivered", func() bool {
			n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("webhook_id = ? AND state = ?", hook, model.DeliveryDelivered).Count(context.Background())
			return err == nil && n == 21
		})
	}
	if n := len(st.rc.requests("/basic")); n != 21 {
		t.Fatalf("the Basic receiver got %d requests, want 21 (the test event and 20 events), each at its first attempt", n)
	}
	if n := len(st.rc.requests("/bearer")); n != 21 {
		t.Fatalf("the Bearer receiver got %d requests, want 21, each at its first attempt", n)
	}
	if n := len(st.rc.requests("/token")); n != 1 {
		t.Fatalf("%d token requests for 21 deliveries, want 1", n)
	}

	// check searches text for the secrets; known, a string text must hold, proves that the search
	// reads what it claims to.
	secrets := map[string]string{
		"the password": password, "the Basic credentials": strings.TrimPrefix(basic, "Basic "),
		"the client secret": clientSecret, "the client's credentials": strings.TrimPrefix(client, "Basic "),
		"the token": token, "the token, base64": base64.StdEncoding.EncodeToString([]byte(token)),
	}
	check := func(where, text string, known ...string) {
		t.Helper()
		secretsAbsent(t, where, text, secrets, known...)
	}

	// The delivery log, as the API answers it: each webhook, its list and three of its deliveries
	// with their attempts (the API key's rate limit bounds how many reads a test makes at once).
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
	for _, hook := range []int64{basicHook, bearerHook} {
		get(fmt.Sprintf("/v2/svc/v2/webhooks/%d", hook))
		list := get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries?limit=100", hook))
		deliveries, _ := list["data"].([]any)
		if len(deliveries) == 0 {
			t.Fatalf("the delivery log lists no delivery: %v", list)
		}
		for _, d := range deliveries[:min(3, len(deliveries))] {
			get(fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries/%.0f", hook, d.(map[string]any)["id"].(float64)))
		}
	}
	// The account's delivery log across webhooks and its audit log (issue 46), which records the
	// webhooks' creation with their credentials.
	get(fmt.Sprintf("/v2/svc/v2/deliveries?webhookId=%d,%d&limit=100", basicHook, bearerHook))
	check("the audit log's answer", string(mustJSON(t, get("/v2/svc/v2/audit-log?limit=100"))), `"webhook.create"`)
	check("the delivery log's answers", answers.String(), `"Authorization":"Basic ••••••••"`, `"Authorization":"Bearer ••••••••"`)

	var headers []string
	if err := st.db.NewSelect().Model((*model.Attempt)(nil)).Column("request_headers").
		Where("delivery_id IN (SELECT id FROM deliveries WHERE webhook_id IN (?, ?))", basicHook, bearerHook).Scan(context.Background(), &headers); err != nil || len(headers) != 42 {
		t.Fatalf("attempt log: %d rows, %v; want 42", len(headers), err)
	}
	check("the attempt log", strings.Join(headers, "\n"), `"Authorization":"Basic ••••••••"`, `"Authorization":"Bearer ••••••••"`)

	tc := temporaltest.Start(t).Client(t)
	var ids []string
	for _, eventID := range events {
		for _, hook := range []int64{basicHook, bearerHook} {
			ids = append(ids, workflows.DeliveryWorkflowID(eventID, hook))
		}
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
