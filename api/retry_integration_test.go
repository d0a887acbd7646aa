//go:build integration

package api_test

import (
	"context"
	"net/http"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/workflows"
)

// TestRetryWebhook: a webhook-wide retry answers 202 at once with the count of exhausted deliveries
// and the id of the one workflow that retries them (named by the webhook and the last of them), in
// the variant's envelope, B with a fresh test event; asked again it names the same workflow; with
// nothing exhausted it answers 0 and no workflow; no claim is left by the request itself.
func TestRetryWebhook(t *testing.T) {
	forEachWithTemporal(t, func(t *testing.T, e *testEnv, v variantCase, tc client.Client) {
		auth := v.auth(newKey(t, e.db))
		hook, first := hookWithDelivery(t, e, v, auth)

		r := e.do(t, "POST", hook+"/retry", auth, "")
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		if d := r.data(t); d["retried"] != float64(0) || d["workflowId"] != nil {
			t.Fatalf("retry with nothing exhausted = %s, want retried 0 and workflowId null", r.raw)
		}

		// Three deliveries of the webhook: exhausted, delivered, exhausted.
		var ids []int64
		for range 2 {
			ev := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name])).data(t)
			var d model.Delivery
			if err := e.db.NewSelect().Model(&d).Where("event_id = ?", int64(ev["id"].(float64))).Where("webhook_id = ?", first.WebhookID).
				Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, d.ID)
		}
		setDeliveryState(t, e, first.ID, model.DeliveryExhausted)
		setDeliveryState(t, e, ids[0], model.DeliveryDelivered)
		setDeliveryState(t, e, ids[1], model.DeliveryExhausted)
		last := ids[1]

		r = e.do(t, "POST", hook+"/retry", auth, "")
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		want := workflows.RetryWebhookWorkflowID(workflows.RetryWebhookInput{WebhookID: first.WebhookID, UpTo: last})
		if d := r.data(t); d["retried"] != float64(2) || d["workflowId"] != want {
			t.Fatalf("retry = %s, want retried 2 and workflowId %s", r.raw, want)
		}
		if _, hasTest := r.data(t)["testEventId"]; hasTest != (v.name == "B") {
			t.Fatalf("retry = %s: testEventId must be there in variant B only", r.raw)
		}
		if _, err := tc.DescribeWorkflowExecution(context.Background(), want, ""); err != nil {
			t.Fatalf("no retry workflow %s: %v", want, err)
		}
		// The request only counts and starts the workflow (no worker polls its queue here): the
		// deliveries are neither claimed nor moved yet.
		for _, id := range []int64{first.ID, last} {
			if got := deliveryState(t, e, id); got != model.DeliveryExhausted {
				t.Fatalf("delivery %d is %s after the request, want exhausted until the workflow runs", id, got)
			}
		}
		again := e.do(t, "POST", hook+"/retry", auth, "")
		again.expect(t, http.StatusAccepted, "")
		if again.data(t)["workflowId"] != want || again.data(t)["retried"] != float64(2) {
			t.Fatalf("second retry = %s, want the same workflow %s and count", again.raw, want)
		}
		e.do(t, "POST", hook+"/retry", v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
	})
}
