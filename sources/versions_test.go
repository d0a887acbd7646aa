package sources_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/sources/sourcestest"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
	"github.com/webhookd/webhookd/wire"
)

// TestVersionTable: every type has version 1 alone; the fixture's version 2 is the newest, the
// one intake accepts (version 1 data is refused, naming budget), its catalog entry lists both,
// its example passes intake, and its conversion gives valid version 1 data. Removed at cleanup,
// the table is as before.
func TestVersionTable(t *testing.T) {
	for _, v := range model.Variants {
		for _, e := range sources.EventCatalog(v) {
			if e.Version != 1 || !slices.Equal(e.Versions, []int{1}) {
				t.Errorf("%s: version %d, versions %v; want 1, [1]", e.Type, e.Version, e.Versions)
			}
		}
	}
	if err := sources.ValidateEventData("campaign.created", json.RawMessage(sourcestest.CampaignV1Data)); err != nil {
		t.Fatal(err)
	}
	t.Run("with version 2", func(t *testing.T) {
		sourcestest.AddCampaignV2(t)
		if n, m := sources.LatestVersion("campaign.created"), model.LatestVersion(sources.Versions(), "campaign.created"); n != 2 || m != 2 {
			t.Fatalf("latest version: sources %d, model %d; want 2", n, m)
		}
		if n := sources.LatestVersion("campaign.updated"); n != 1 {
			t.Fatalf("campaign.updated latest version %d, want 1", n)
		}
		if err := sources.ValidateEventData("campaign.created", json.RawMessage(sourcestest.CampaignV2Data)); err != nil {
			t.Fatalf("version 2 data refused: %v", err)
		}
		err := sources.ValidateEventData("campaign.created", json.RawMessage(sourcestest.CampaignV1Data))
		var de *input.DataError
		if !errors.As(err, &de) || de.Field != "data.budget" {
			t.Fatalf("version 1 data at intake: %v; want a refusal of data.budget", err)
		}
		entry := catalogEntry(t, model.VariantA, "campaign.created")
		if entry.Version != 2 || !slices.Equal(entry.Versions, []int{1, 2}) {
			t.Fatalf("catalog entry: version %d, versions %v", entry.Version, entry.Versions)
		}
		if err := sources.ValidateEventData("campaign.created", entry.Example); err != nil {
			t.Fatalf("the version 2 example fails intake: %v", err)
		}
		if err := sources.CheckDowns("campaign.created"); err != nil {
			t.Fatal(err)
		}
		// The catalog's schema is version 2's; each version has its own, which takes its data only.
		if entry.SchemaURL != "/schemas/events/campaign.created/v2.json" {
			t.Errorf("catalog schemaUrl %q", entry.SchemaURL)
		}
		for _, tc := range []struct {
			version    int
			data       string
			acceptable bool
		}{{1, sourcestest.CampaignV1Data, true}, {1, sourcestest.CampaignV2Data, false}, {2, sourcestest.CampaignV2Data, true}, {2, sourcestest.CampaignV1Data, false}} {
			schema, ok := sources.DataSchema("campaign.created", tc.version, sources.JSONSchema)
			if !ok {
				t.Fatalf("no schema of version %d", tc.version)
			}
			if err := schematest.Validate(t, schematest.Compile(t, schema), []byte(tc.data)); (err == nil) != tc.acceptable {
				t.Errorf("version %d's schema on %s: %v", tc.version, tc.data, err)
			}
		}
		if _, ok := sources.DataSchema("campaign.created", 3, sources.JSONSchema); ok {
			t.Error("a schema of version 3, which does not exist")
		}
		got, err := model.DataAt(sources.Versions(), "campaign.created", json.RawMessage(canonical(t, sourcestest.CampaignV2Data)), 2, 1)
		if err != nil || string(got) != canonical(t, sourcestest.CampaignV1Data) {
			t.Fatalf("version 2 converted to 1: %s, %v; want %s", got, err, canonical(t, sourcestest.CampaignV1Data))
		}
		if _, err := model.DataAt(sources.Versions(), "campaign.created", json.RawMessage(sourcestest.CampaignV1Data), 1, 2); err != nil {
			t.Fatalf("a version is never converted up, data is given as it is: %v", err)
		}
	})
	if n := model.LatestVersion(sources.Versions(), "campaign.created"); n != 1 {
		t.Fatalf("after cleanup the latest version is %d, want 1", n)
	}
}

// TestCheckDownsFails: a down function that leaves version 2's shape fails CheckDowns, so the
// check can fail.
func TestCheckDownsFails(t *testing.T) {
	sources.AddVersion[sourcestest.CampaignV2](t, "campaign.created", func(data json.RawMessage) (json.RawMessage, error) { return data, nil })
	if err := sources.CheckDowns("campaign.created"); err == nil {
		t.Fatal("a down that keeps version 2's budget passed the check")
	}
}

// TestPinnedVersionIsDelivered (issue 32): a webhook registered while campaign.created had one
// version stays on version 1 when version 2 arrives; one registered with version 2, and one
// registered without a version (the newest), get version 2. One event of version 2 data is
// published through the use cases; the delivery activity posts version 1 data to the first and
// version 2 data to the others, and the filters of version 1 webhooks are judged on version 1
// data (budget a number): one that matches budget's number passes, one that matches version 2's
// object does not.
func TestPinnedVersionIsDelivered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		receiver := sourcestest.NewReceiver(t)
		box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
		if err != nil {
			t.Fatal(err)
		}
		// As webhookstest.New, with the receiver's loopback address allowed.
		s, err := webhooks.New(webhooks.Config{DB: db, Secrets: box, Policy: egress.AddressPolicy{AllowPrivate: true},
			Resolver: webhookstest.OfflineResolver, Logger: slog.New(slog.DiscardHandler), MaxWebhooks: 100, RequestTimeout: 3 * time.Second,
			Versions: sources.Versions()})
		if err != nil {
			t.Fatal(err)
		}
		_, acc, err := model.CreateAPIKey(ctx, db, "versions@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		register := func(path string, version *int, filter string) *model.Webhook {
			t.Helper()
			settings := webhooks.Settings{Version: version}
			if filter != "" {
				settings.Filter = webhooks.FilterEdit{Set: true, JSON: json.RawMessage(filter)}
			}
			w, _, err := s.Create(ctx, scope, webhooks.Registration{URL: receiver.URL + path, EventType: "campaign.created", Settings: settings})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		// Before version 2 exists: version 1, the newest then.
		v1 := register("/v1", nil, `{"data":{"budget":{"$gte":1000}}}`)
		v1Refused := register("/v1-object", nil, `{"data":{"budget":{"amount":1500}}}`)
		if v1.Version != 1 {
			t.Fatalf("a webhook registered before version 2 has version %d", v1.Version)
		}

		sourcestest.AddCampaignV2(t)
		two := 2
		v2 := register("/v2", &two, "")
		newest := register("/newest", nil, `{"data":{"budget":{"amount":1500}}}`)
		if v2.Version != 2 || newest.Version != 2 {
			t.Fatalf("versions %d and %d, want 2 and 2", v2.Version, newest.Version)
		}
		if stored, err := s.Get(ctx, scope, v1.ID); err != nil || stored.Version != 1 {
			t.Fatalf("the first webhook is now %+v, %v; want version 1 still", stored, err)
		}

		if err := sources.ValidateEventData("campaign.created", json.RawMessage(sourcestest.CampaignV2Data)); err != nil {
			t.Fatal(err)
		}
		res, err := s.Publish(ctx, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: canonical(t, sourcestest.CampaignV2Data)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Event.Version != 2 || res.Event.Matched != 3 || res.Event.Filtered != 1 {
			t.Fatalf("event: version %d, matched %d, filtered %d; want 2, 3, 1 (the version 1 filter on budget.amount refuses it)",
				res.Event.Version, res.Event.Matched, res.Event.Filtered)
		}
		for _, d := range res.Deliveries {
			if d.WebhookID == v1Refused.ID {
				t.Fatalf("the version 1 webhook whose filter reads budget.amount got a delivery")
			}
		}

		out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: rootsOf(receiver.Server), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		a := &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test", Versions: sources.Versions()}
		env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
		env.RegisterActivity(a)
		for _, d := range res.Deliveries {
			v, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: d.WebhookID, Attempt: 1, AttemptTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var r activities.DeliverResult
			if err := v.Get(&r); err != nil || !r.Delivered {
				t.Fatalf("delivery %d: %+v, %v", d.ID, r, err)
			}
		}
		got := receiver.Bodies()
		want := map[string]string{"/v1": sourcestest.CampaignV1Data, "/v2": sourcestest.CampaignV2Data, "/newest": sourcestest.CampaignV2Data}
		if len(got) != len(want) {
			t.Fatalf("the receiver got %d bodies, want %d: %s", len(got), len(want), got)
		}
		for path, data := range want {
			body := wire.BodyA("campaign.created", json.RawMessage(canonical(t, data)), res.Event.OccurredAt)
			if !bytes.Equal(got[path], body) {
				t.Errorf("%s got\n%s\nwant\n%s", path, got[path], body)
			}
		}

		// The delivery log rebuilds the body the receiver got.
		for _, d := range res.Deliveries {
			w, err := s.Get(ctx, scope, d.WebhookID)
			if err != nil {
				t.Fatal(err)
			}
			view, err := model.GetDelivery(ctx, db, w.ID, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			data, err := s.DataFor(view.Event(w.Variant), w)
			if err != nil {
				t.Fatal(err)
			}
			path := strings.TrimPrefix(w.URL, receiver.URL)
			if logged := wire.LoggedBody(wire.LayoutA, view.EventType, data, view.EventOccurredAt); !bytes.Equal(logged, got[path]) {
				t.Errorf("the log of %s shows\n%s\nthe receiver got\n%s", path, logged, got[path])
			}
		}

		// PATCH and PUT change the version; one the type does not have is refused naming it.
		if w, err := s.SetSettings(ctx, scope, v1.ID, webhooks.Settings{Version: &two}); err != nil || w.Version != 2 {
			t.Fatalf("PATCH to version 2: %+v, %v", w, err)
		}
		one, three := 1, 3
		if w, err := s.Update(ctx, scope, v1.ID, v1.URL, webhooks.Settings{Version: &one}); err != nil || w.Version != 1 {
			t.Fatalf("PUT back to version 1: %+v, %v", w, err)
		}
		var invalid *webhooks.InvalidError
		if _, err := s.SetSettings(ctx, scope, v1.ID, webhooks.Settings{Version: &three}); !errors.As(err, &invalid) || invalid.Field != "version" {
			t.Fatalf("PATCH to version 3: %v; want a refusal naming version", err)
		}
		if w, err := s.SetSettings(ctx, scope, v1.ID, webhooks.Settings{}); err != nil || w.Version != 1 {
			t.Fatalf("PATCH without a version: %+v, %v; want version 1 kept", w, err)
		}
	})
}

func canonical(t *testing.T, s string) string {
	t.Helper()
	b, err := wire.CanonicalJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func catalogEntry(t *testing.T, v model.Variant, eventType string) sources.EventTypeInfo {
	t.Helper()
	for _, e := range sources.EventCatalog(v) {
		if e.Type == eventType {
			return e
		}
	}
	t.Fatalf("no %s in the catalog of variant %s", eventType, v)
	return sources.EventTypeInfo{}
}

func rootsOf(srv *httptest.Server) *x509.CertPool {
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return roots
}
