//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

var campaign = map[string]any{
	"id": 42, "name": "Spring launch", "platform": "meta", "status": "active",
	"startDate": "2026-03-01T00:00:00.000Z", "endDate": "2026-03-31T23:59:59.999Z", "budget": 1500.5,
}

// sampleData is one valid payload per event type, with characters that trip naive signers.
var sampleData = map[string]any{
	"campaign.created": campaign, "campaign.updated": campaign, "campaign.processing": campaign,
	"campaign.completed": campaign, "campaign.failed": campaign,
	"website.published": map[string]any{"websiteId": 7, "brandId": 3, "slug": "spring-<tour>", "url": "https://sites.example.com/spring", "publishedAt": "2026-11-23T10:00:00Z", "scheduledPublish": false},
	"website.archived":  map[string]any{"websiteId": 7, "brandId": 3, "slug": "spring", "archivedAt": "2026-11-23T10:00:00Z"},
	"lead.captured": map[string]any{"websiteId": 7, "brandId": 3, "collectDataId": "blk_1", "email": "fan@example.com", "phone": "+14155550123",
		"name": "Zoë & \u2028 \"Ä\"", "customFields": map[string]any{"city": "Köln"},
		"source": map[string]any{"referrer": "https://t.co/x?a=1&b=2", "userAgent": "Mozilla/5.0", "ipAddress": "203.0.113.9", "country": "DE"}},
	"presave.completed": map[string]any{"websiteId": 7, "brandId": 3, "platform": "spotify", "fanEmail": nil, "releaseDate": "2026-12-01T00:00:00Z",
		"releaseUrl": "https://open.example.com/album/1", "boosts": map[string]any{"followedArtist": true, "savedCatalog": false, "emailCollected": false}},
	"analytics.threshold": map[string]any{"websiteId": 7, "brandId": 3, "metric": "pageViews", "value": 10000, "threshold": 10000, "thresholdType": "reached"},
}

// TestDeliversEveryEventType sends every event type of both variants through the API and checks
// the exact body and headers the receiver gets.
func TestDeliversEveryEventType(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.rc.setRespond(func(int, string, http.ResponseWriter) {})
	var verify []map[string]string // variant B bodies as received, for an independent check
	for _, variant := range []string{"A", "B"} {
		for _, et := range model.Variant(variant).EventTypes() {
			path := "/" + variant + "/" + et
			id, secret := st.createWebhook(t, variant, st.rc.url(path), et)
			if variant == "B" {
				// Registration is followed by a test delivery.
				eventually(t, 30*time.Second, "webhook.test for "+et, func() bool { return len(st.rc.requests(path)) == 1 })
				checkDelivery(t, st, st.rc.requests(path)[0], variant, model.EventTest, id, secret)
			}
			eventID := st.publish(t, variant, et, sampleData[et])
			want := 1
			if variant == "B" {
				want = 2
			}
			eventually(t, 30*time.Second, et+" delivered", func() bool { return len(st.rc.requests(path)) == want })
			got := st.rc.requests(path)[want-1]
			checkDelivery(t, st, got, variant, et, id, secret)
			if variant == "B" {
				for _, r := range st.rc.requests(path) {
					verify = append(verify, map[string]string{"body": string(r.Body), "secret": secret})
				}
			}
			if h := got.Header.Get("Webhook-Id"); h != fmt.Sprintf("msg_%d_%d", eventID, id) {
				t.Errorf("%s webhook-id = %q", et, h)
			}
			// The receiver answered before the attempt was recorded; wait for the record.
			eventually(t, 30*time.Second, et+" recorded", func() bool { return st.delivery(t, eventID, id).State == model.DeliveryDelivered })
			if d := st.delivery(t, eventID, id); d.Attempts != 1 {
				t.Errorf("%s delivery = %+v", et, d)
			}
		}
	}
	// Node verifies the received variant B bodies the way the spec tells receivers to.
	for i, answer := range verifyWithNode(t, verify) {
		if answer != "ok" {
			t.Errorf("node rejects the signature of %s: %s", verify[i]["body"], answer)
		}
	}
	if len(verify) != 10 {
		t.Fatalf("node verified %d variant B bodies, want 10 (5 tests, 5 events)", len(verify))
	}
	// Every body also meets its envelope's and its type's JSON Schema (as every test's bodies do
	// when its receiver closes); here each type of both variants is among them.
	if n := checkDeliveryBodies(t, st.rc.requests("")); n != 15 {
		t.Errorf("%d delivery bodies checked against their schemas, want 15 (5 A, 5 B, 5 B tests)", n)
	}

	families, err := st.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	for _, name := range []string{"webhookd_deliveries_total", "webhookd_delivery_attempt_duration_seconds", "webhookd_http_requests_total"} {
		if !seen[name] {
			t.Errorf("metric %s not exported", name)
		}
	}
}

// checkDelivery verifies one received request against an independent rebuild of what webhookd
// must send: the exact body bytes, the headers, and both signatures.
func checkDelivery(t *testing.T, st *stack, got receivedRequest, variant, eventType string, webhookID int64, secret string) {
	t.Helper()
	msgID := got.Header.Get("Webhook-Id")
	var eventID int64
	if _, err := fmt.Sscanf(msgID, "msg_%d_", &eventID); err != nil {
		t.Fatalf("webhook-id %q: %v", msgID, err)
	}
	ev := st.event(t, eventID)
	if ev.EventType != eventType {
		t.Fatalf("delivered event %d is %s, want %s", eventID, ev.EventType, eventType)
	}
	var want []byte
	if variant == "A" {
		want = wire.BodyA(eventType, json.RawMessage(ev.Data), ev.OccurredAt)
	} else {
		want = wire.BodyB(eventType, json.RawMessage(ev.Data), ev.OccurredAt, secret)
	}
	if string(got.Body) != string(want) {
		t.Fatalf("%s body\n got %s\nwant %s", eventType, got.Body, want)
	}
	var parsed map[string]any
	if err := json.Unmarshal(got.Body, &parsed); err != nil {
		t.Fatal(err)
	}
	if variant == "A" {
		if ts, _ := parsed["timestamp"].(string); len(ts) != len("2006-01-02T15:04:05.000Z") || !strings.HasSuffix(ts, "Z") {
			t.Errorf("A timestamp = %q", parsed["timestamp"])
		}
	} else {
		if ts, _ := parsed["timestamp"].(string); len(ts) != len("2006-01-02T15:04:05Z") || !strings.HasSuffix(ts, "Z") {
			t.Errorf("B timestamp = %q", parsed["timestamp"])
		}
		if sig, _ := parsed["signature"].(string); !strings.HasPrefix(sig, "sha256=") || len(sig) != len("sha256=")+64 {
			t.Errorf("B signature = %q", parsed["signature"])
		}
	}
	for h, v := range map[string]string{"Content-Type": "application/json", "X-Service-Event": eventType, "User-Agent": "webhookd/test"} {
		if got.Header.Get(h) != v {
			t.Errorf("%s: header %s = %q, want %q", eventType, h, got.Header.Get(h), v)
		}
	}
	ts, err := strconv.ParseInt(got.Header.Get("Webhook-Timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)) > time.Minute {
		t.Fatalf("webhook-timestamp = %q", got.Header.Get("Webhook-Timestamp"))
	}
	wantSig, err := wire.StandardSignature(msgID, time.Unix(ts, 0), got.Body, secret)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get("Webhook-Signature") != wantSig {
		t.Fatalf("webhook-signature = %q, want %q", got.Header.Get("Webhook-Signature"), wantSig)
	}
	if want := fmt.Sprintf("msg_%d_%d", eventID, webhookID); msgID != want {
		t.Fatalf("webhook-id = %q, want %q", msgID, want)
	}
}

// TestFailThenSucceed: a 500 then a 200 delivers on the second attempt; variant A shows failed,
// then processing; variant B records the failure and stays active.
func TestFailThenSucceed(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{2 * time.Second, 2 * time.Second}})
	st.rc.setRespond(func(n int, path string, w http.ResponseWriter) {
		if strings.HasSuffix(path, "/flaky") && n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	for _, variant := range []string{"A", "B"} {
		et := model.Variant(variant).EventTypes()[0]
		path := "/" + variant + "/flaky"
		if variant == "B" {
			path = "/B/ok-then/flaky"
		}
		id, _ := st.createWebhook(t, variant, st.rc.url(path), et)
		if variant == "B" {
			// The test event takes the first (failing) reply: it is not retried and marks failing.
			eventually(t, 30*time.Second, "test event", func() bool { return st.webhook(t, id).Status == model.StatusFailing })
		}
		eventID := st.publish(t, variant, et, sampleData[et])
		if variant == "A" {
			eventually(t, 30*time.Second, "A failed after the first attempt", func() bool { return st.webhook(t, id).Status == model.StatusFailed })
		}
		eventually(t, 30*time.Second, "delivered on retry", func() bool { return st.delivery(t, eventID, id).State == model.DeliveryDelivered })
		d := st.delivery(t, eventID, id)
		w := st.webhook(t, id)
		switch variant {
		case "A":
			if d.Attempts != 2 || w.Status != model.StatusProcessing {
				t.Fatalf("A: attempts %d, status %s", d.Attempts, w.Status)
			}
		case "B":
			// B's event succeeded on its first attempt (the test took the 500) and healed the webhook.
			if w.Status != model.StatusActive || w.FailureCount != 0 || w.LastStatus == nil || *w.LastStatus != model.LastStatusSuccess {
				t.Fatalf("B webhook after success: %+v", w)
			}
		}
	}
}

// TestExhaustionAlertsOnceThenRecovers: two deliveries exhaust their schedule against a dead
// receiver; the webhook moves to failing (B) or failed (A) and the owner gets exactly one e-mail
// per variant; a REST retry after the receiver is fixed delivers both and heals the webhook.
func TestExhaustionAlertsOnceThenRecovers(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}})
	healthy := make(chan struct{})
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) {
		select {
		case <-healthy:
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	for i, variant := range []string{"A", "B"} {
		et := model.Variant(variant).EventTypes()[1]
		id, _ := st.createWebhook(t, variant, st.rc.url("/dead/"+variant), et)
		var events []int64
		for j := 0; j < 2; j++ {
			events = append(events, st.publish(t, variant, et, sampleData[et]))
		}
		for _, e := range events {
			st.waitIdle(t, e, id, model.DeliveryExhausted)
			if d := st.delivery(t, e, id); d.State != model.DeliveryExhausted || d.Attempts != 3 {
				t.Fatalf("%s delivery %+v", variant, d)
			}
		}
		if variant == "B" {
			st.waitIdle(t, st.testEventOf(t, id), id, model.DeliveryExhausted)
		}
		want := map[string]string{"A": model.StatusFailed, "B": model.StatusFailing}[variant]
		if w := st.webhook(t, id); w.Status != want {
			t.Fatalf("%s status = %s, want %s", variant, w.Status, want)
		}
		// The alert is a notice, delivered to the owner's e-mail by its own workflow right after.
		eventually(t, 30*time.Second, variant+" alert e-mail", func() bool { return len(st.mb.Messages()) >= i+1 })
		mails := st.mb.Messages()
		if len(mails) != i+1 {
			t.Fatalf("after %s exhaustion: %d e-mails, want %d", variant, len(mails), i+1)
		}
		m := mails[i]
		text := m.Text(t)
		// Variant B's move into failing came first from its failed test event.
		alertType := map[string]string{"A": et, "B": model.EventTest}[variant]
		for _, want := range []string{fmt.Sprintf("webhook %d", id), st.rc.url("/dead/" + variant), alertType, "receiver answered 503",
			fmt.Sprintf("%s/webhooks/%d/retry", collection(variant), id), fmt.Sprintf("WebhookId=%d AND DeliveryState=\"exhausted\"", id)} {
			if !strings.Contains(text, want) {
				t.Fatalf("alert e-mail lacks %q: to %v\n%s", want, m.To, text)
			}
		}
		if len(m.To) != 1 || m.To[0] != "owner@example.com" {
			t.Fatalf("alert e-mail to %v", m.To)
		}
	}

	close(healthy)
	for _, variant := range []string{"A", "B"} {
		var id int64
		ids := st.webhookIDs(t, variant)
		id = ids[0]
		status, body, _ := st.call(t, variant, "POST", fmt.Sprintf("%s/webhooks/%d/retry", collection(variant), id), nil)
		if status != http.StatusAccepted {
			t.Fatalf("retry: %d %v", status, body)
		}
		retried := body["data"].(map[string]any)["retried"].(float64)
		wantRetried := map[string]float64{"A": 2, "B": 3}[variant] // B also had its failed test event
		if retried != wantRetried {
			t.Fatalf("%s retried %v, want %v", variant, retried, wantRetried)
		}
		want := map[string]string{"A": model.StatusProcessing, "B": model.StatusActive}[variant]
		eventually(t, 30*time.Second, variant+" healed", func() bool { return st.webhook(t, id).Status == want })
		eventually(t, 30*time.Second, variant+" all delivered", func() bool {
			n, _ := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("webhook_id = ? AND state <> ?", id, model.DeliveryDelivered).Count(context.Background())
			return n == 0
		})
	}
	// Healed, each webhook's owner is told once that it recovered.
	eventually(t, 30*time.Second, "recovery e-mails", func() bool { return len(st.mb.Messages()) >= 4 })
	mails := st.mb.Messages()
	if n := len(mails); n != 4 {
		t.Fatalf("%d e-mails in total, want 4 (failing and recovered, each variant)", n)
	}
	for _, m := range mails[2:] {
		if text := m.Text(t); !strings.Contains(text, "webhook.recovered") {
			t.Fatalf("e-mail after the retry is not a recovery:\n%s", text)
		}
	}
}

func (st *stack) webhookIDs(t *testing.T, variant string) []int64 {
	t.Helper()
	var ids []int64
	if err := st.db.NewSelect().Model((*model.Webhook)(nil)).Column("id").Where("variant = ?", variant).Where("kind = ?", model.KindWebhook).
		OrderExpr("id").Scan(context.Background(), &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (st *stack) testEventOf(t *testing.T, webhookID int64) int64 {
	t.Helper()
	var id int64
	err := st.db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		ColumnExpr("e.id").Where("d.webhook_id = ? AND e.event_type = ?", webhookID, model.EventTest).
		OrderExpr("e.id").Limit(1).Scan(context.Background(), &id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestTestEventFailureAlertsAtOnce: a failed webhook.test is not retried; the webhook is failing
// and the owner alerted right away; a success later heals it.
func TestTestEventFailureAlertsAtOnce(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Hour}})
	st.rc.setRespond(func(n int, _ string, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	id, _ := st.createWebhook(t, "B", st.rc.url("/test-fails"), "lead.captured")
	testID := st.testEventOf(t, id)
	st.waitIdle(t, testID, id, model.DeliveryExhausted)
	if d := st.delivery(t, testID, id); d.Attempts != 1 {
		t.Fatalf("test event attempts = %d, want 1 (no retries)", d.Attempts)
	}
	if w := st.webhook(t, id); w.Status != model.StatusFailing || w.FailureCount != 1 || *w.LastStatus != model.LastStatusFailed {
		t.Fatalf("webhook after failed test: %+v", w)
	}
	eventually(t, 10*time.Second, "alert", func() bool { return len(st.mb.Messages()) == 1 })
	eventID := st.publish(t, "B", "lead.captured", sampleData["lead.captured"])
	eventually(t, 30*time.Second, "healed by a success", func() bool { return st.webhook(t, id).Status == model.StatusActive })
	if d := st.delivery(t, eventID, id); d.State != model.DeliveryDelivered {
		t.Fatalf("delivery %+v", d)
	}
}

// TestRetrySignal: an operator's retry signal (as sent from the Web UI) re-runs an exhausted
// delivery from its first attempt.
func TestRetrySignal(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}})
	healthy := make(chan struct{})
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) {
		select {
		case <-healthy:
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	id, _ := st.createWebhook(t, "A", st.rc.url("/signal"), "campaign.failed")
	eventID := st.publish(t, "A", "campaign.failed", campaign)
	st.waitIdle(t, eventID, id, model.DeliveryExhausted)
	close(healthy)
	if err := st.tc.SignalWorkflow(context.Background(), workflows.DeliveryWorkflowID(eventID, id), "", workflows.SignalRetry, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "delivered after signal", func() bool { return st.delivery(t, eventID, id).State == model.DeliveryDelivered })
	if d := st.delivery(t, eventID, id); d.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3 (two failed, one after the signal)", d.Attempts)
	}
	if got := len(st.rc.requests("/signal")); got != 3 {
		t.Fatalf("receiver got %d requests, want 3", got)
	}
}

// TestIdempotentIntake: the same Idempotency-Key and body is one event and one delivery; the same
// key with another body is refused.
func TestIdempotentIntake(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.createWebhook(t, "A", st.rc.url("/idem"), "campaign.created")
	first := st.publish(t, "A", "campaign.created", campaign, "Idempotency-Key", "order-1")
	status, body, header := st.call(t, "A", "POST", "/api/svc/v2/events", map[string]any{"eventType": "campaign.created", "data": campaign}, "Idempotency-Key", "order-1")
	if status != http.StatusAccepted || int64(body["data"].(map[string]any)["id"].(float64)) != first || header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %v", status, body, header)
	}
	other := map[string]any{}
	for k, v := range campaign {
		other[k] = v
	}
	other["budget"] = 1
	status, body, _ = st.call(t, "A", "POST", "/api/svc/v2/events", map[string]any{"eventType": "campaign.created", "data": other}, "Idempotency-Key", "order-1")
	if status != http.StatusConflict || body["code"] != "conflict" {
		t.Fatalf("reuse with another body: %d %v", status, body)
	}
	eventually(t, 30*time.Second, "delivered", func() bool { return len(st.rc.requests("/idem")) >= 1 })
	n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("event_id = ?", first).Count(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("deliveries of the event = %d, %v", n, err)
	}
	st.waitDelivered(t, first)
	if got := len(st.rc.requests("/idem")); got != 1 {
		t.Fatalf("receiver got %d requests, want 1", got)
	}
}

func (st *stack) waitDelivered(t *testing.T, eventID int64) {
	t.Helper()
	eventually(t, 30*time.Second, "event delivered", func() bool {
		n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("event_id = ? AND state <> ?", eventID, model.DeliveryDelivered).Count(context.Background())
		return err == nil && n == 0
	})
}

// TestSlowReceiverTimesOut, TestRedirectIsNotFollowed: both count as failed attempts, classified.
func TestSlowReceiverAndRedirect(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, timeout: time.Second, schedule: []time.Duration{time.Hour}})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		switch path {
		case "/slow":
			select {
			case <-release:
			case <-time.After(3 * time.Second):
			}
		case "/redirect":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		}
	})
	slow, _ := st.createWebhook(t, "A", st.rc.url("/slow"), "campaign.created")
	redirect, _ := st.createWebhook(t, "A", st.rc.url("/redirect"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", campaign)
	for id, class := range map[int64]string{slow: activities.ClassTimeout, redirect: activities.ClassRedirect} {
		eventually(t, 30*time.Second, class+" attempt recorded", func() bool { return st.delivery(t, eventID, id).Attempts == 1 })
		var a model.Attempt
		if err := st.db.NewSelect().Model(&a).Where("delivery_id = ?", st.delivery(t, eventID, id).ID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if a.ErrorClass == nil || *a.ErrorClass != class {
			t.Fatalf("attempt class = %v, want %s (%+v)", a.ErrorClass, class, a)
		}
		if st.webhook(t, id).Status != model.StatusFailed {
			t.Fatalf("webhook %d status %s, want failed", id, st.webhook(t, id).Status)
		}
	}
	if n := len(st.rc.requests("/elsewhere")); n != 0 {
		t.Fatalf("the redirect was followed: %d requests to /elsewhere", n)
	}
}

// TestDialTimeAddressCheck: a host name that resolves to 127.0.0.1 (as after DNS rebinding) gets no
// connection when private targets are not allowed; the attempt is classified blocked.
func TestDialTimeAddressCheck(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: false, schedule: []time.Duration{time.Hour}})
	_, port, _ := strings.Cut(strings.TrimPrefix(st.rc.srv.URL, "https://"), ":")
	// Registration would refuse localhost; a name that resolved publicly at registration and
	// rebinds later reaches the engine the same way: already stored.
	box, _ := secretbox.New(testSecretKey)
	sealed, _ := box.Seal("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	acc, _, err := model.Authenticate(context.Background(), st.db, st.key)
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://localhost:" + port + "/rebound", EventType: "campaign.created",
		Status: model.StatusPending, Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(context.Background(), st.db, w, 100); err != nil {
		t.Fatal(err)
	}
	eventID := st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "attempt recorded", func() bool { return st.delivery(t, eventID, w.ID).Attempts == 1 })
	var a model.Attempt
	if err := st.db.NewSelect().Model(&a).Where("delivery_id = ?", st.delivery(t, eventID, w.ID).ID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.ErrorClass == nil || *a.ErrorClass != activities.ClassBlocked {
		t.Fatalf("attempt = %+v, want class blocked", a)
	}
	if n := st.rc.connections(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
}

// TestURLChangeAndDeleteDuringRetries: the next attempt after a URL change goes to the new URL; a
// deleted webhook's delivery ends without posting again.
func TestURLChangeAndDeleteDuringRetries(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{2 * time.Second, 2 * time.Second}})
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path != "/new" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	moved, _ := st.createWebhook(t, "A", st.rc.url("/old"), "campaign.updated")
	deleted, _ := st.createWebhook(t, "A", st.rc.url("/gone"), "campaign.updated")
	eventID := st.publish(t, "A", "campaign.updated", campaign)
	eventually(t, 30*time.Second, "first attempts failed", func() bool {
		return st.delivery(t, eventID, moved).Attempts == 1 && st.delivery(t, eventID, deleted).Attempts == 1
	})
	if s, b, _ := st.call(t, "A", "PUT", fmt.Sprintf("/api/svc/v2/webhooks/%d", moved), map[string]string{"url": st.rc.url("/new")}); s != 200 {
		t.Fatalf("update: %d %v", s, b)
	}
	if s, b, _ := st.call(t, "A", "DELETE", fmt.Sprintf("/api/svc/v2/webhooks/%d", deleted), nil); s != 200 {
		t.Fatalf("delete: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "delivered to the new URL", func() bool { return len(st.rc.requests("/new")) == 1 })
	eventually(t, 30*time.Second, "deleted webhook's delivery canceled", func() bool {
		return st.delivery(t, eventID, deleted).State == model.DeliveryCanceled
	})
	if n := len(st.rc.requests("/gone")); n != 1 {
		t.Fatalf("deleted webhook got %d posts, want 1 (before the delete)", n)
	}
}

// verifyWithNode runs wire/testdata/verify-signature.mjs, an independent JavaScript
// implementation of the receiver's check, over every request and returns its answers.
func verifyWithNode(t *testing.T, reqs []map[string]string) []string {
	t.Helper()
	lines := make([]any, len(reqs))
	for i, r := range reqs {
		lines[i] = r
	}
	return runVerifier(t, lines)
}

// runVerifier runs wire/testdata/verify-signature.mjs over one request per line of reqs (see the
// script for their shapes) and returns its answers, one each.
func runVerifier(t *testing.T, reqs []any) []string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node (Node.js) is required to verify signatures as receivers do: %v", err)
	}
	var in bytes.Buffer
	for _, r := range reqs {
		line, _ := json.Marshal(r)
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", filepath.Join("..", "wire", "testdata", "verify-signature.mjs"))
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	answers := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(answers) != len(reqs) {
		t.Fatalf("node answered %d lines for %d bodies", len(answers), len(reqs))
	}
	return answers
}

// TestRotationSignsWithBothSecrets: after a rotation the Standard Webhooks header carries a
// signature with the new secret and one with the old, and the variant B body is signed with the new.
func TestRotationSignsWithBothSecrets(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	id, old := st.createWebhook(t, "B", st.rc.url("/rotate"), "presave.completed")
	status, body, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/webhooks/%d/secret/rotate", id), nil)
	if status != http.StatusOK {
		t.Fatalf("rotate: %d %v", status, body)
	}
	next := body["data"].(map[string]any)["secret"].(string)
	eventID := st.publish(t, "B", "presave.completed", sampleData["presave.completed"])
	eventually(t, 30*time.Second, "delivery after rotation", func() bool {
		for _, r := range st.rc.requests("/rotate") {
			if r.Header.Get("Webhook-Id") == fmt.Sprintf("msg_%d_%d", eventID, id) {
				return true
			}
		}
		return false
	})
	var got receivedRequest
	for _, r := range st.rc.requests("/rotate") {
		if r.Header.Get("Webhook-Id") == fmt.Sprintf("msg_%d_%d", eventID, id) {
			got = r
		}
	}
	ts, _ := strconv.ParseInt(got.Header.Get("Webhook-Timestamp"), 10, 64)
	want, err := wire.StandardSignature(got.Header.Get("Webhook-Id"), time.Unix(ts, 0), got.Body, next, old)
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Header.Get("Webhook-Signature"); h != want || len(strings.Fields(h)) != 2 {
		t.Fatalf("webhook-signature = %q, want %q (new, then old)", h, want)
	}
	answers := verifyWithNode(t, []map[string]string{{"body": string(got.Body), "secret": next}, {"body": string(got.Body), "secret": old}})
	if answers[0] != "ok" || !strings.HasPrefix(answers[1], "mismatch") {
		t.Fatalf("body signature with new / old secret: %v; want ok / mismatch", answers)
	}
}

// TestFanOutStartsManyDeliveries: an event reaching more webhooks than FanOutThreshold is answered
// after one workflow start, its FanOutWorkflow's; that workflow starts every delivery, each in its
// own delivery workflow, and each webhook gets the event once. An event reaching a few webhooks is
// started by the request itself.
func TestFanOutStartsManyDeliveries(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	n := dispatch.FanOutThreshold + 9
	hooks := map[int64]bool{}
	for i := range n {
		id, _ := st.createWebhook(t, "A", st.rc.url(fmt.Sprintf("/fan/%d", i)), "campaign.created")
		hooks[id] = true
	}
	started := func(by dispatch.StartedBy) float64 {
		return testutil.ToFloat64(st.starter.Starts.WithLabelValues(string(by)))
	}
	eventID := st.publish(t, "A", "campaign.created", campaign)
	if got := started(dispatch.StartedByRequest); got != 0 {
		t.Errorf("the request started %v delivery workflows itself, want 0 (the fan-out starts them)", got)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("%d deliveries of event %d", n, eventID), func() bool {
		total := 0
		for i := range n {
			total += len(st.rc.requests(fmt.Sprintf("/fan/%d", i)))
		}
		return total >= n
	})
	// Each receiver answered before its attempt was recorded; wait for the records.
	eventually(t, 30*time.Second, fmt.Sprintf("%d deliveries of event %d recorded", n, eventID), func() bool {
		for id := range hooks {
			if s := st.delivery(t, eventID, id).State; s == model.DeliveryPending || s == model.DeliveryDelivering {
				return false
			}
		}
		return true
	})
	for id := range hooks {
		if d := st.delivery(t, eventID, id); d.State != model.DeliveryDelivered || d.Attempts != 1 || d.DispatchedAt == nil {
			t.Errorf("delivery to webhook %d: %s after %d attempts, dispatched %v", id, d.State, d.Attempts, d.DispatchedAt)
		}
	}
	for i := range n {
		if got := len(st.rc.requests(fmt.Sprintf("/fan/%d", i))); got != 1 {
			t.Errorf("webhook %d received the event %d times", i, got)
		}
	}
	if got := started(dispatch.StartedByFanOut); got != float64(n) {
		t.Errorf("the fan-out started %v delivery workflows, want %d", got, n)
	}
	// The fan-out ends once its activity has reported the starts, which may be after the deliveries
	// it started have all been recorded: wait for its end rather than look at it once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.tc.GetWorkflow(ctx, workflows.FanOutWorkflowID(eventID), "").Get(ctx, nil); err != nil {
		t.Errorf("the fan-out workflow did not complete: %v", err)
	}

	// A few webhooks: the request starts them.
	few, _ := st.createWebhook(t, "A", st.rc.url("/few"), "campaign.updated")
	before := started(dispatch.StartedByRequest)
	fewEvent := st.publish(t, "A", "campaign.updated", campaign)
	if got := started(dispatch.StartedByRequest) - before; got != 1 {
		t.Errorf("the request started %v workflows for one webhook, want 1", got)
	}
	eventually(t, 30*time.Second, "the one delivery", func() bool { return st.delivery(t, fewEvent, few).State == model.DeliveryDelivered })
}
