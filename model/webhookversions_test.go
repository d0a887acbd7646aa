package model_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestWebhookVersions: the broker pool's liveness read gives each live webhook's updated_at, and
// leaves out a deleted one and an id that never existed.
func TestWebhookVersions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "versions@example.com", "")
		live := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		gone := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		if err := model.DeleteWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}, gone.ID); err != nil {
			t.Fatal(err)
		}
		got, err := model.WebhookVersions(ctx, db, []int64{live.ID, gone.ID, gone.ID + 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[live.ID] != live.DestinationVersion() {
			t.Fatalf("versions = %v, want only webhook %d at %s", got, live.ID, live.DestinationVersion())
		}
		// A status change is no new version; a new URL or destination is.
		before := live.DestinationVersion()
		live.Status, live.FailureCount = model.StatusFailing, 3
		if live.DestinationVersion() != before {
			t.Fatal("a status change moved the destination's version")
		}
		live.URL += "x"
		if live.DestinationVersion() == before {
			t.Fatal("a new URL kept the destination's version")
		}
	})
}
