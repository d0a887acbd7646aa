//go:build integration

package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

// forEachWithTemporal is forEach with a Dispatcher on the dev server: workflows start (on a task
// queue no worker polls, so they wait), signals land, and nothing is delivered.
func forEachWithTemporal(t *testing.T, fn func(t *testing.T, e *testEnv, v variantCase, tc client.Client), opts ...serverOption) {
	tc := temporaltest.Start(t).Client(t)
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), append([]serverOption{func(c *envConfig) {
				c.Temporal = tc
				c.Dispatcher = &dispatch.Dispatcher{Client: tc, TaskQueue: "nowhere-" + strings.ReplaceAll(t.Name(), "/", "-"),
					Schedule: []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}, RetryWindow: time.Hour, AttemptTimeout: time.Second}
			}}, opts...)...)
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) { fn(t, e, v, tc) })
			}
		})
	}
}

// TestRetryOneDelivery: a delivery is sent again whatever its state: a delivered one gets a new run
// of its workflow and is delivering again; a canceled one is refused; tenancy and malformed ids
// are refused; with Temporal away the answer is 503 and the delivery keeps its state.
func TestRetryOneDelivery(t *testing.T) {
	forEachWithTemporal(t, func(t *testing.T, e *testEnv, v variantCase, tc client.Client) {
		auth := v.auth(newKey(t, e.db))
		hook, d := hookWithDelivery(t, e, v, auth)
		ctx := context.Background()
		wfID := workflows.DeliveryWorkflowID(d.EventID, d.WebhookID)
		// The request started its workflow; it ends as if delivered.
		if err := tc.TerminateWorkflow(ctx, wfID, "", "delivered, for the test"); err != nil {
			t.Fatal(err)
		}
		setDeliveryState(t, e, d.ID, model.DeliveryDelivered)
		first, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
		if err != nil {
			t.Fatal(err)
		}

		path := fmt.Sprintf("%s/deliveries/%d/retry", hook, d.ID)
		r := e.do(t, "POST", path, auth, "")
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		if r.data(t)["deliveryId"] != float64(d.ID) || r.data(t)["messageId"] != wire.MessageID(d.EventID, d.WebhookID) {
			t.Fatalf("retry answer = %s", r.raw)
		}
		if got := deliveryState(t, e, d.ID); got != model.DeliveryDelivering {
			t.Fatalf("state after the resend = %s, want delivering", got)
		}
		second, err := tc.DescribeWorkflowExecution(ctx, wfID, "")
		if err != nil {
			t.Fatal(err)
		}
		if second.WorkflowExecutionInfo.Execution.RunId == first.WorkflowExecutionInfo.Execution.RunId {
			t.Fatal("the resend did not start a new run of the delivery's workflow")
		}
		// Still running: this time the retry is a signal.
		e.do(t, "POST", path, auth, "{}").expect(t, http.StatusAccepted, "")

		e.do(t, "POST", path, auth, `{"x":1}`).expectError(t, v, http.StatusBadRequest, "x")
		e.do(t, "POST", path, v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "POST", hook+"/deliveries/999999/retry", auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "POST", hook+"/deliveries/x/retry", auth, "").expectError(t, v, http.StatusBadRequest, "deliveryId")

		setDeliveryState(t, e, d.ID, model.DeliveryCanceled)
		e.do(t, "POST", path, auth, "").expectError(t, v, http.StatusConflict, "")
	})
}

// TestRecover: a recovery counts the webhook's deliveries in the window that did not succeed and
// starts one workflow for them; bad windows and bodies are refused on their field.
func TestRecover(t *testing.T) {
	forEachWithTemporal(t, func(t *testing.T, e *testEnv, v variantCase, tc client.Client) {
		auth := v.auth(newKey(t, e.db))
		hook, first := hookWithDelivery(t, e, v, auth)
		setDeliveryState(t, e, first.ID, model.DeliveryExhausted)
		since := e.clock.Now().Add(time.Millisecond)
		e.clock.Advance(5 * time.Millisecond) // created_at after since
		var wantIDs []int64
		for _, state := range []string{model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryRetrying} {
			ev := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name])).data(t)
			var d model.Delivery
			if err := e.db.NewSelect().Model(&d).Where("event_id = ?", int64(ev["id"].(float64))).Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			setDeliveryState(t, e, d.ID, state)
			if state != model.DeliveryDelivered {
				wantIDs = append(wantIDs, d.ID)
			}
		}

		e.clock.Advance(time.Millisecond) // the recovery is asked for after they were created
		r := e.do(t, "POST", hook+"/recover", auth, fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339Nano)))
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		if got := r.data(t)["queued"]; got != float64(len(wantIDs)) {
			t.Fatalf("queued = %v, want %d: %s", got, len(wantIDs), r.raw)
		}
		// One workflow retries them, named by the request: the webhook, since, and "now" for an
		// until left open.
		wf := workflows.RecoverWorkflowID(first.WebhookID, since, time.Time{})
		if got := r.data(t)["workflowId"]; got != wf {
			t.Fatalf("workflowId = %v, want %s", got, wf)
		}
		if _, err := tc.DescribeWorkflowExecution(context.Background(), wf, ""); err != nil {
			t.Fatalf("no recover workflow %s: %v", wf, err)
		}
		// The same request while it runs (no worker here: it runs for good) joins it and answers as
		// it did, although one of the deliveries has succeeded since and time has passed.
		setDeliveryState(t, e, wantIDs[0], model.DeliveryDelivered)
		again := e.do(t, "POST", hook+"/recover", auth, fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339Nano)))
		again.expect(t, http.StatusAccepted, "")
		for _, field := range []string{"queued", "since", "until", "workflowId"} {
			if again.data(t)[field] != r.data(t)[field] {
				t.Fatalf("the same request again answered %s, want %s", again.raw, r.raw)
			}
		}

		// Nothing failed before the first delivery: 202, nothing queued, no workflow.
		none := e.do(t, "POST", hook+"/recover", auth, `{"since":"2020-01-01T00:00:00Z","until":"2020-01-02T00:00:00Z"}`)
		none.expect(t, http.StatusAccepted, "")
		if d := none.data(t); d["queued"] != float64(0) || d["workflowId"] != nil || d["until"] != "2020-01-02T00:00:00.000Z" {
			t.Fatalf("an empty window answered %s, want queued 0 and no workflowId", none.raw)
		}

		for _, bad := range []struct {
			body   string
			status int
			field  string
		}{
			{`{}`, http.StatusUnprocessableEntity, "since"},
			{`{"since":"yesterday"}`, http.StatusBadRequest, "since"},
			{`{"since":12}`, http.StatusBadRequest, "since"},
			{`{"since":"2020-01-01T00:00:00Z","until":"2019-01-01T00:00:00Z"}`, http.StatusUnprocessableEntity, "since"},
			{`{"since":"2020-01-01T00:00:00Z","until":"soon"}`, http.StatusBadRequest, "until"},
			{fmt.Sprintf(`{"since":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusUnprocessableEntity, "since"},
			{`{"since":"2020-01-01T00:00:00Z","extra":1}`, http.StatusBadRequest, "extra"},
			{`{"since":"0000-01-01T00:00:00Z"}`, http.StatusUnprocessableEntity, "since"},
			{`{"since":"2020-01-01T00:00:00Z","until":"9999-12-31T23:00:00-05:00"}`, http.StatusUnprocessableEntity, "until"},
			{`{"since":`, http.StatusBadRequest, ""},
		} {
			e.do(t, "POST", hook+"/recover", auth, bad.body).expectError(t, v, bad.status, bad.field)
		}
		e.do(t, "POST", hook+"/recover", v.auth(newKey(t, e.db)), `{"since":"2020-01-01T00:00:00Z"}`).expectError(t, v, http.StatusNotFound, "")
	}, withClock)
}
