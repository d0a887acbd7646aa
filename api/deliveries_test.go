package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
)

// hookWithDelivery registers a webhook and publishes one event to it; it returns the webhook's path
// and the event's delivery.
func hookWithDelivery(t *testing.T, e *testEnv, v variantCase, auth func(*http.Request)) (string, model.Delivery) {
	t.Helper()
	hook := v.collection + "/" + jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/hook?token=t0p", v.eventType)).data(t)["id"])
	ev := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name]))
	ev.expect(t, http.StatusAccepted, "")
	var d model.Delivery
	if err := e.db.NewSelect().Model(&d).Where("event_id = ?", int64(ev.data(t)["id"].(float64))).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return hook, d
}

func setDeliveryState(t *testing.T, e *testEnv, id int64, state string) {
	t.Helper()
	if err := dbtest.SetDeliveryState(context.Background(), e.db, id, state); err != nil {
		t.Fatal(err)
	}
}

func deliveryState(t *testing.T, e *testEnv, id int64) string {
	t.Helper()
	var d model.Delivery
	if err := e.db.NewSelect().Model(&d).Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d.State
}

// TestDeliveryDetail: one delivery with every attempt, each with the headers it sent and no
// signature, and the body rebuilt from the event in the variant's shape; another webhook's
// delivery, another account's webhook and a malformed id are refused.
func TestDeliveryDetail(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook, d := hookWithDelivery(t, e, v, auth)
		w := &model.Webhook{}
		if err := e.db.NewSelect().Model(w).Where("id = ?", d.WebhookID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		sent := `{"Content-Type":"application/json","User-Agent":"webhookd/test","Webhook-Id":"msg_x","Webhook-Timestamp":"1"}`
		for n := 1; n <= 2; n++ {
			o := model.AttemptOutcome{Success: n == 2}
			o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt = d.ID, n, w.URL, model.Now()
			if n == 2 {
				o.RequestHeaders = &sent // attempt 1 is from before headers were kept
			}
			if _, err := model.RecordAttempt(context.Background(), e.db, w, o); err != nil {
				t.Fatal(err)
			}
		}

		r := e.do(t, "GET", fmt.Sprintf("%s/deliveries/%d", hook, d.ID), auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		got := r.data(t)
		if got["state"] != "delivered" || got["attempts"] != float64(2) || got["messageId"] != wire.MessageID(d.EventID, d.WebhookID) {
			t.Fatalf("delivery = %s", r.raw)
		}
		log := got["attemptLog"].([]any)
		if len(log) != 2 || log[0].(map[string]any)["requestHeaders"] != nil {
			t.Fatalf("attempt log = %v; want 2 attempts, the first without headers", log)
		}
		headers := log[1].(map[string]any)["requestHeaders"].(map[string]any)
		if headers["Webhook-Id"] != "msg_x" || headers["Webhook-Signature"] != nil {
			t.Fatalf("attempt 2 headers = %v", headers)
		}
		var ev model.Event
		if err := e.db.NewSelect().Model(&ev).Where("id = ?", d.EventID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := wire.BodyA(ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt)
		if v.name == "B" {
			want = wire.UnsignedBodyB(ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt)
		}
		payload, _ := json.Marshal(got["payload"])
		var wantObj any
		_ = json.Unmarshal(want, &wantObj)
		wantJSON, _ := json.Marshal(wantObj)
		if string(payload) != string(wantJSON) || strings.Contains(string(payload), "signature") {
			t.Fatalf("payload = %s, want %s", payload, wantJSON)
		}

		otherHook, _ := hookWithDelivery(t, e, v, auth)
		e.do(t, "GET", fmt.Sprintf("%s/deliveries/%d", otherHook, d.ID), auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "GET", fmt.Sprintf("%s/deliveries/%d", hook, d.ID), v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "GET", hook+"/deliveries/x", auth, "").expectError(t, v, http.StatusBadRequest, "deliveryId")
		e.do(t, "GET", hook+"/deliveries/0", auth, "").expectError(t, v, http.StatusBadRequest, "deliveryId")
		e.do(t, "GET", fmt.Sprintf("%s/deliveries/%d", hook, d.ID), nil, "").expectError(t, v, http.StatusUnauthorized, "")
	})
}

// TestRetryOneDeliveryTemporalDown: with Temporal unreachable a resend and a recovery answer 503
// and the delivery keeps its state.
func TestRetryOneDeliveryTemporalDown(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), func(c *envConfig) { c.Dispatcher = &dispatch.Dispatcher{Client: c.Temporal, TaskQueue: "nowhere"} })
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					auth := v.auth(newKey(t, e.db))
					hook, d := hookWithDelivery(t, e, v, auth)
					setDeliveryState(t, e, d.ID, model.DeliveryDelivered)
					r := e.do(t, "POST", fmt.Sprintf("%s/deliveries/%d/retry", hook, d.ID), auth, "")
					r.expectError(t, v, http.StatusServiceUnavailable, "")
					if got := deliveryState(t, e, d.ID); got != model.DeliveryDelivered {
						t.Fatalf("state after a failed resend = %s, want delivered", got)
					}
					setDeliveryState(t, e, d.ID, model.DeliveryExhausted)
					e.do(t, "POST", hook+"/recover", auth, `{"since":"2020-01-01T00:00:00Z"}`).expectError(t, v, http.StatusServiceUnavailable, "")
					if got := deliveryState(t, e, d.ID); got != model.DeliveryExhausted {
						t.Fatalf("state after a failed recovery = %s, want exhausted", got)
					}
				})
			}
		})
	}
}

// TestTestSend: POST .../test sends a webhook.test event to that webhook alone, in both variants,
// and answers with its delivery, which the delivery log then shows.
func TestTestSend(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook := v.collection + "/" + jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"])
		// A second webhook of the account, which must not get the test.
		e.do(t, "POST", v.collection, auth, createBody("https://other.example.com/", v.eventType)).expect(t, http.StatusCreated, "")

		r := e.do(t, "POST", hook+"/test", auth, "")
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		typeField := map[string]string{"A": "eventType", "B": "event"}[v.name]
		if r.data(t)[typeField] != model.EventTest {
			t.Fatalf("test answer = %s", r.raw)
		}
		eventID := int64(r.data(t)["eventId"].(float64))
		var ev model.Event
		if err := e.db.NewSelect().Model(&ev).Where("id = ?", eventID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ev.Matched != 1 {
			t.Fatalf("the test event reached %d webhooks, want 1", ev.Matched)
		}
		detail := e.do(t, "GET", fmt.Sprintf("%s/deliveries/%s", hook, jsonNumber(r.data(t)["deliveryId"])), auth, "")
		detail.expect(t, http.StatusOK, "")
		payload := detail.data(t)["payload"].(map[string]any)
		if payload[typeField] != model.EventTest || payload["data"] == nil || payload["timestamp"] == nil {
			t.Fatalf("the test delivery's body = %v, want the variant's shape with %s %s", payload, typeField, model.EventTest)
		}

		e.do(t, "POST", hook+"/test", auth, `{"eventType":"campaign.created"}`).expectError(t, v, http.StatusBadRequest, "eventType")
		e.do(t, "POST", hook+"/test", v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "POST", hook+"/test", nil, "").expectError(t, v, http.StatusUnauthorized, "")
	})
}
