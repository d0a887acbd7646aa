//go:build integration

package main

import (
	"context"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

// TestWebhooksCommandsAudited: the operator's retry of a webhook, of one delivery, and recovery,
// run by `webhookd webhooks` against Temporal, are each recorded once in the account's audit log
// with the CLI command as the actor.
func TestWebhooksCommandsAudited(t *testing.T) {
	srv := temporaltest.Start(t)
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db")
	environ := []string{"WEBHOOKD_DATABASE_URL=" + dsn, "WEBHOOKD_DATA_DIR=" + t.TempDir(),
		"TEMPORAL_ADDRESS=" + srv.Address, "TEMPORAL_NAMESPACE=" + srv.Namespace, "WEBHOOKD_TASK_QUEUE=nowhere-audit"}
	do := func(args ...string) {
		t.Helper()
		if err := run(ctx, args, environ, io.Discard, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	db, err := openDB(ctx, Config{DatabaseURL: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, acc, err := model.CreateAPIKey(ctx, db, "ops@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://a.example.com/", EventType: "campaign.created",
		Status: model.StatusPending, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	id, delivery := strconv.FormatInt(w.ID, 10), strconv.FormatInt(res.Deliveries[0].ID, 10)
	do("webhooks", "retry", id)
	do("webhooks", "retry", id, "--delivery", delivery)
	do("webhooks", "recover", id, "--since", now.Add(-model.SecretOverlap).Format("2006-01-02T15:04:05Z"))

	var entries []model.AuditEntry
	if err := db.NewSelect().Model(&entries).OrderExpr("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	want := []struct{ action, target, id, label string }{
		{"retry", "webhook", id, "webhookd webhooks retry"},
		{"delivery.retry", "delivery", delivery, "webhookd webhooks retry"},
		{"recover", "webhook", id, "webhookd webhooks recover"},
	}
	if len(entries) != len(want) {
		t.Fatalf("entries %+v, want %d", entries, len(want))
	}
	for i, x := range want {
		e := entries[i]
		if e.Action != x.action || e.TargetType != x.target || e.TargetID != x.id || e.ActorKind != model.ActorKindCLI || e.ActorLabel != x.label ||
			e.AccountID != acc.ID || e.Variant != model.VariantA {
			t.Errorf("entry %d: %+v, want %s on %s %s by cli %q", i, e, x.action, x.target, x.id, x.label)
		}
	}
}
