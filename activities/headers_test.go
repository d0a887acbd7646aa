package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
)

// TestDeliverCustomHeaders (issue 31): an attempt sends the webhook's own headers after webhookd's,
// a stored reserved name is skipped rather than overriding webhookd's, and the attempt log records
// each custom header by name with its value redacted; neither the log nor the activity's log output
// holds the value.
func TestDeliverCustomHeaders(t *testing.T) {
	const token = "tok-0123456789-abcd"
	ctx := context.Background()
	db := dbtest.SQLite(t)
	got := make(chan http.Header, 1)
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.Header.Get("X-Api-Token") != token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	box, err := secretbox.New(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	// Stored as webhooks.Service stores them; User-Agent could only be there by a defect, and is
	// skipped at send time all the same.
	headers, err := box.Seal(`{"X-Api-Token":"` + token + `","User-Agent":"evil","x-tenant":"t1"}`)
	if err != nil {
		t.Fatal(err)
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "headers@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, Headers: &headers, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Deliveries[0]

	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test"}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: 1, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var result activities.DeliverResult
	if err := v.Get(&result); err != nil || !result.Delivered {
		t.Fatalf("attempt: %+v, %v; want delivered", result, err)
	}
	sent := <-got
	if sent.Get("X-Api-Token") != token || sent.Get("X-Tenant") != "t1" || sent.Get("User-Agent") != "webhookd/test" || sent.Get("Webhook-Signature") == "" {
		t.Fatalf("the receiver got %v", sent)
	}

	view, err := model.GetDelivery(ctx, db, w.ID, d.ID)
	if err != nil || len(view.Log) != 1 || view.Log[0].RequestHeaders == nil {
		t.Fatalf("delivery %+v, %v", view, err)
	}
	logHeaders := *view.Log[0].RequestHeaders
	var recorded map[string]string
	if err := json.Unmarshal([]byte(logHeaders), &recorded); err != nil {
		t.Fatal(err)
	}
	if recorded["X-Api-Token"] != "••••abcd" || recorded["X-Tenant"] != "••••••••" || recorded["User-Agent"] != "webhookd/test" {
		t.Fatalf("the attempt log recorded %s", logHeaders)
	}
	for what, text := range map[string]string{"the attempt log": logHeaders, "the log output": logged.String()} {
		if strings.Contains(text, token) || strings.Contains(text, "t1\"") || strings.Contains(text, "evil") {
			t.Fatalf("%s holds a header's value: %s", what, text)
		}
	}
}

// refusedStored are custom headers that a webhook could hold from before issue 41, when only
// webhookd's own names were refused: hop-by-hop names, and names that change what the request
// means. Each is dropped when sent, and the attempt log shows what was sent.
const refusedStored = `{"X-Api-Token":"tok-0123456789-abcd","Trailer":"X-Sum","Te":"gzip","Keep-Alive":"timeout=5",` +
	`"Proxy-Connection":"keep-alive","Upgrade":"websocket","Expect":"100-continue","Date":"Tue, 01 Dec 2026 00:00:00 GMT",` +
	`"Content-Encoding":"gzip","Content-Language":"en","Accept-Encoding":"br","Proxy-Authorization":"Basic eDp5"}`

// TestDeliverHeadersAsSent (issue 41, defect 5): the attempt log's requestHeaders are what the
// receiver got, over HTTP/1.1 and HTTP/2, for a webhook whose stored headers hold names that are
// refused now: every name logged arrived, with its value (custom ones redacted in the log), and
// every name that arrived is logged, except what Go's client adds itself (Content-Length,
// Accept-Encoding: gzip) and the signature, which the log leaves out by design.
func TestDeliverHeadersAsSent(t *testing.T) {
	for _, c := range []struct {
		name  string
		http2 bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan *http.Request, 1)
			receiver := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				got <- r
				w.WriteHeader(http.StatusNoContent)
			}))
			receiver.EnableHTTP2 = c.http2
			receiver.StartTLS()
			t.Cleanup(receiver.Close)
			res, logged := deliverStoredHeaders(t, receiver, refusedStored)
			if !res.Delivered {
				t.Fatalf("attempt: %+v; want delivered", res)
			}
			r := <-got
			if want := map[bool]int{false: 1, true: 2}[c.http2]; r.ProtoMajor != want {
				t.Fatalf("the receiver got %s, want HTTP/%d", r.Proto, want)
			}
			received := r.Header
			if received.Get("X-Api-Token") != "tok-0123456789-abcd" || logged["X-Api-Token"] != "••••abcd" {
				t.Errorf("X-Api-Token: logged %q, received %q", logged["X-Api-Token"], received.Get("X-Api-Token"))
			}
			var custom map[string]string
			if err := json.Unmarshal([]byte(refusedStored), &custom); err != nil {
				t.Fatal(err)
			}
			for name, value := range logged {
				got, ok := received.Values(name), false
				if _, ok = custom[name]; ok && len(got) == 1 {
					got = []string{wire.Redacted(got[0])} // the log redacts a custom header's value
				}
				if strings.Join(got, ", ") != value {
					t.Errorf("the attempt log shows %s: %q; the receiver got %q", name, value, received.Values(name))
				}
			}
			byClient := map[string]string{"Content-Length": "", "Accept-Encoding": "gzip", "Webhook-Signature": ""}
			for name := range received {
				if want, ok := byClient[name]; ok && (want == "" || received.Get(name) == want) {
					continue
				}
				if _, ok := logged[name]; !ok {
					t.Errorf("the receiver got %s: %q, which the attempt log does not show", name, received.Values(name))
				}
			}
			for _, name := range []string{"Trailer", "Te", "Keep-Alive", "Proxy-Connection", "Upgrade", "Expect", "Date",
				"Content-Encoding", "Content-Language", "Proxy-Authorization"} {
				if _, ok := logged[name]; ok || received.Get(name) != "" {
					t.Errorf("%s: logged %v, received %q; want neither", name, ok, received.Get(name))
				}
			}
		})
	}
}

// deliverStoredHeaders makes one attempt of a webhook to receiver whose stored custom headers are
// stored (a JSON object, sealed as webhooks.Service seals it, but written directly, as a row from
// before a rule would be), and returns its result and the attempt log's requestHeaders.
func deliverStoredHeaders(t *testing.T, receiver *httptest.Server, stored string) (activities.DeliverResult, map[string]string) {
	t.Helper()
	f := newAttemptFixture(t, receiver, &stored)
	res := f.attempt(t, 1)
	view, err := model.GetDelivery(context.Background(), f.db, f.w.ID, f.d.ID)
	if err != nil || len(view.Log) != 1 || view.Log[0].RequestHeaders == nil {
		t.Fatalf("delivery %+v, %v", view, err)
	}
	var logged map[string]string
	if err := json.Unmarshal([]byte(*view.Log[0].RequestHeaders), &logged); err != nil {
		t.Fatal(err)
	}
	return res, logged
}

// attemptFixture is one delivery of a webhook of variant A to a receiver, and the activities that
// attempt it, on a fresh SQLite database.
type attemptFixture struct {
	db  *model.DB
	w   *model.Webhook
	d   model.Delivery
	a   *activities.Activities
	env *testsuite.TestActivityEnvironment
}

// newAttemptFixture registers a webhook to receiver (its custom headers, when given, stored sealed
// as they are, written directly) and publishes one event to it.
func newAttemptFixture(t *testing.T, receiver *httptest.Server, headers *string) *attemptFixture {
	t.Helper()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	box, err := secretbox.New(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	w := &model.Webhook{Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, CreatedAt: model.Now(), UpdatedAt: model.Now()}
	if headers != nil {
		sealedHeaders, err := box.Seal(*headers)
		if err != nil {
			t.Fatal(err)
		}
		w.Headers = &sealedHeaders
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "fixture@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	w.AccountID = acc.ID
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	ins, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test"}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return &attemptFixture{db: db, w: w, d: ins.Deliveries[0], a: a, env: env}
}

// attempt runs Deliver for the fixture's delivery as attempt n and returns its result.
func (f *attemptFixture) attempt(t *testing.T, n int) activities.DeliverResult {
	t.Helper()
	v, err := f.env.ExecuteActivity(f.a.Deliver, activities.DeliverInput{DeliveryID: f.d.ID, EventID: f.d.EventID, WebhookID: f.w.ID,
		Attempt: n, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var res activities.DeliverResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	return res
}
