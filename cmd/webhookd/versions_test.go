package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources/sourcestest"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/wire"
)

// TestProductionWiringConvertsPinnedVersions (issue 42): what serve and the operator's commands
// build is given sources' table of event versions (docs/events.md, "Versions"); nothing registers
// it at init any more, so a builder that left it out would know one version of each type. With a
// version 2 of campaign.created added, serve's use cases give a new webhook version 2 and publish
// version 2 data as version 2; a webhook pinned to version 1 receives the data converted down
// from serve's activities, and the delivery log of serve's and of the operator's use cases shows it
// converted.
func TestProductionWiringConvertsPinnedVersions(t *testing.T) {
	sourcestest.AddCampaignV2(t)
	ctx := t.Context()

	receiver := sourcestest.NewReceiver(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: receiver.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg, err := loadConfig([]string{"WEBHOOKD_EXTRA_CA_FILE=" + caFile, "WEBHOOKD_DATA_DIR=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db")
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	registry, err := newRegistry()
	if err != nil {
		t.Fatal(err)
	}
	// serve's parts, with the receiver's loopback address allowed.
	p := serveParts{db: db, secrets: box, registry: registry, logger: slog.New(slog.DiscardHandler),
		policy: egress.AddressPolicy{AllowPrivate: true}}
	uses, err := serveUseCases(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	acts, err := newActivities(cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := operatorReads(cfg, db, nil)
	if err != nil {
		t.Fatal(err)
	}

	_, acc, err := model.CreateAPIKey(ctx, db, "versions@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
	register := func(path string, version *int) *model.Webhook {
		t.Helper()
		w, _, err := uses.Create(ctx, scope, webhooks.Registration{URL: receiver.URL + path, EventType: "campaign.created",
			Settings: webhooks.Settings{Version: version}})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	one := 1
	pinned, newest := register("/v1", &one), register("/newest", nil)
	if pinned.Version != 1 || newest.Version != 2 {
		t.Fatalf("webhook versions %d and %d, want 1 and 2 (the newest)", pinned.Version, newest.Version)
	}
	res, err := uses.Publish(ctx, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: canonical(t, sourcestest.CampaignV2Data)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Version != 2 || len(res.Deliveries) != 2 {
		t.Fatalf("event version %d with %d deliveries, want version 2 with 2", res.Event.Version, len(res.Deliveries))
	}

	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	for _, d := range res.Deliveries {
		v, err := env.ExecuteActivity(acts.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: d.WebhookID, Attempt: 1, AttemptTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var r activities.DeliverResult
		if err := v.Get(&r); err != nil || !r.Delivered {
			t.Fatalf("delivery %d: %+v, %v", d.ID, r, err)
		}
	}
	got := receiver.Bodies()
	want := map[string]string{"/v1": sourcestest.CampaignV1Data, "/newest": sourcestest.CampaignV2Data}
	for path, data := range want {
		if body := wire.BodyA("campaign.created", json.RawMessage(canonical(t, data)), res.Event.OccurredAt); !bytes.Equal(got[path], body) {
			t.Errorf("%s received\n%s\nwant\n%s", path, got[path], body)
		}
	}

	// The delivery log of serve's and of the operator's use cases shows the body as received.
	for name, s := range map[string]*webhooks.Service{"serve": uses, "operator": operator} {
		for _, w := range []*model.Webhook{pinned, newest} {
			data, err := s.DataFor(res.Event, w)
			if err != nil {
				t.Fatalf("%s's use cases, the data for version %d: %v", name, w.Version, err)
			}
			path := strings.TrimPrefix(w.URL, receiver.URL)
			if logged := wire.LoggedBody(wire.LayoutA, res.Event.EventType, data, res.Event.OccurredAt); !bytes.Equal(logged, got[path]) {
				t.Errorf("%s's use cases show %s\n%s\nthe receiver got\n%s", name, path, logged, got[path])
			}
		}
	}
}

// canonical is data in canonical JSON, as intake stores it.
func canonical(t *testing.T, data string) string {
	t.Helper()
	c, err := wire.CanonicalJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}
