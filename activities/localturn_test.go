package activities_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
)

// TestLocalAttemptWaitsForQuickTurn: a first attempt (a local activity) that finds its endpoint at
// its cap, behind an exchange that ends in a few tens of milliseconds, waits for its turn in the
// worker and delivers, instead of handing the attempt back to run as a regular activity. Without a
// LocalWaits place it hands back, as before; so does one whose turn is not due soon.
func TestLocalAttemptWaitsForQuickTurn(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	var hold atomic.Int64 // how long the receiver takes to answer
	arrived := make(chan struct{}, 16)
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		time.Sleep(time.Duration(hold.Load()))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	box, err := secretbox.New(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "turns@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	one := 1 // one attempt in flight at the endpoint
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, MaxInFlight: &one, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	attempt := func() activities.DeliverInput {
		t.Helper()
		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Deliveries[0]
		return activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: 1, AttemptTimeout: 5 * time.Second}
	}

	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Secrets: box, Egress: out, LocalWaits: 1}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	local := func(a *activities.Activities, in activities.DeliverInput) activities.DeliverResult {
		t.Helper()
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		v, err := env.ExecuteLocalActivity(a.Deliver, in)
		if err != nil {
			t.Fatalf("attempt of delivery %d: %v", in.DeliveryID, err)
		}
		var res activities.DeliverResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	// behindSlowOne makes an attempt while another holds the endpoint's one place for 60 ms.
	behindSlowOne := func(a *activities.Activities) activities.DeliverResult {
		t.Helper()
		hold.Store(int64(60 * time.Millisecond))
		first := attempt()
		done := make(chan activities.DeliverResult, 1)
		go func() { done <- local(a, first) }()
		<-arrived
		res := local(a, attempt())
		if r := <-done; !r.Delivered {
			t.Fatalf("the first attempt: %+v", r)
		}
		for len(arrived) > 0 { // the attempt behind's, unless it was handed back
			<-arrived
		}
		return res
	}

	// A quick exchange first, so the host's estimate of an exchange is milliseconds, not the
	// one second it starts from.
	if res := local(a, attempt()); !res.Delivered {
		t.Fatalf("warm-up attempt: %+v", res)
	}
	<-arrived

	if res := behindSlowOne(a); !res.Delivered || res.HostBusy {
		t.Fatalf("an attempt behind a 60 ms exchange, with a place to wait: %+v; want it delivered", res)
	}
	noPlace := &activities.Activities{DB: db, Secrets: box, Egress: out}
	if res := behindSlowOne(noPlace); !res.HostBusy || res.HeldBy != string(egress.HeldByEndpointCap) {
		t.Fatalf("an attempt behind a 60 ms exchange, without a place to wait: %+v; want it handed back", res)
	}
	// Ten exchanges of 400 ms make the host's estimate far longer than a local attempt waits.
	hold.Store(int64(400 * time.Millisecond))
	for range 10 {
		if res := local(a, attempt()); !res.Delivered {
			t.Fatalf("slow attempt: %+v", res)
		}
		<-arrived
	}
	if res := behindSlowOne(a); res.Delivered || !res.HostBusy {
		t.Fatalf("an attempt behind a slow receiver: %+v; want it handed back at once", res)
	}
}

// rootsOf trusts the test receiver's certificate.
func rootsOf(srv *httptest.Server) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return roots
}
