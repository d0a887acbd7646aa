package model_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

func currentSecret(t *testing.T, db bun.IDB, id int64) string {
	t.Helper()
	return reload(t, db, id).Secret
}

// TestRotationKeepsEveryPreviousSecret (issue 8, #5): a second rotation within the overlap keeps the
// first rotated-out secret until the expiry its rotation promised, each secret with its own expiry;
// at most MaxPreviousSecrets sign at once, and a rotation beyond that is refused, changing nothing.
func TestRotationKeepsEveryPreviousSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "rotate@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created") // secret "v1:x"
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		base := model.Now()

		if err := model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:s2", base.Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:s3", base.Add(25*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := currentSecret(t, db, w.ID); got != "v1:s3" {
			t.Fatalf("current secret = %q, want v1:s3", got)
		}
		prev, err := model.ListPreviousSecrets(ctx, db, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(prev) != 2 || prev[0].Secret != "v1:s2" || !prev[0].ExpiresAt.Equal(base.Add(25*time.Hour)) ||
			prev[1].Secret != "v1:x" || !prev[1].ExpiresAt.Equal(base.Add(24*time.Hour)) {
			t.Fatalf("previous secrets after two rotations = %+v", prev)
		}

		// The delivery path sees them too.
		d := deliveryFor(t, db, acc.ID, w)
		target, err := model.LoadDeliveryTarget(ctx, db, d)
		if err != nil {
			t.Fatal(err)
		}
		if got := target.Webhook.PreviousSecrets; len(got) != 2 || got[0].Secret != "v1:s2" || got[1].Secret != "v1:x" {
			t.Fatalf("LoadDeliveryTarget previous secrets = %+v", got)
		}

		for i := 4; i <= 1+model.MaxPreviousSecrets; i++ {
			if err := model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:s"+string(rune('0'+i)), base.Add(time.Duration(22+i)*time.Hour)); err != nil {
				t.Fatalf("rotation %d: %v", i-1, err)
			}
		}
		err = model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:refused", base.Add(48*time.Hour))
		var limit *model.RotationLimitError
		if !errors.As(err, &limit) || !limit.RetryAt.Equal(base.Add(24*time.Hour)) {
			t.Fatalf("rotation beyond the bound = %v, want a RotationLimitError naming the oldest expiry", err)
		}
		if got := currentSecret(t, db, w.ID); got == "v1:refused" {
			t.Fatal("a refused rotation changed the secret")
		}
		if prev, _ := model.ListPreviousSecrets(ctx, db, w.ID); len(prev) != model.MaxPreviousSecrets || prev[len(prev)-1].Secret != "v1:x" {
			t.Fatalf("a refused rotation changed the previous secrets: %+v", prev)
		}

		other := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}
		if err := model.RotateWebhookSecret(ctx, db, other, w.ID, "v1:intruder", base.Add(time.Hour)); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("rotation in another scope = %v, want ErrNotFound", err)
		}
	})
}

// TestRotationPrunesExpiredSecrets: an expired previous secret neither counts against the bound nor
// stays stored once the next rotation runs.
func TestRotationPrunesExpiredSecrets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "prune@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}
		past := model.Now().Add(-time.Minute)
		for i := range model.MaxPreviousSecrets {
			if err := model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:old"+string(rune('0'+i)), past); err != nil {
				t.Fatalf("rotation %d: %v", i+1, err)
			}
		}
		until := model.Now().Add(24 * time.Hour)
		if err := model.RotateWebhookSecret(ctx, db, scope, w.ID, "v1:new", until); err != nil {
			t.Fatalf("rotation after the others expired: %v", err)
		}
		prev, err := model.ListPreviousSecrets(ctx, db, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(prev) != 1 || prev[0].Secret != "v1:old4" || !prev[0].ExpiresAt.Equal(until) {
			t.Fatalf("previous secrets = %+v, want only the one rotated out last", prev)
		}
	})
}

// TestMigrationMovesPreviousSecret: migration 0006 moves the one previous secret of the old columns
// into webhook_previous_secrets, keeping its expiry, and clears the old columns.
func TestMigrationMovesPreviousSecret(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "legacy@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		plain := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		// Back to the schema before 0006, with a webhook rotated the old way.
		for _, stmt := range []string{
			"DROP TABLE webhook_previous_secrets",
			"DELETE FROM schema_migrations WHERE version = '0006_previous_secrets'",
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		until := model.Now().Add(3 * time.Hour)
		if _, err := db.NewUpdate().Table("webhooks").Set("previous_secret = ?", "v1:legacy").
			Set("previous_secret_expires_at = ?", until).Where("id = ?", w.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if err := model.Migrate(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		prev, err := model.ListPreviousSecrets(ctx, db, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(prev) != 1 || prev[0].Secret != "v1:legacy" || !prev[0].ExpiresAt.Equal(until) {
			t.Fatalf("migrated previous secrets = %+v", prev)
		}
		if prev, _ := model.ListPreviousSecrets(ctx, db, plain.ID); len(prev) != 0 {
			t.Fatalf("a never rotated webhook got previous secrets: %+v", prev)
		}
		var left int
		if err := db.NewSelect().Table("webhooks").ColumnExpr("COUNT(*)").Where("previous_secret IS NOT NULL").Scan(ctx, &left); err != nil || left != 0 {
			t.Fatalf("old columns still hold %d secrets (%v)", left, err)
		}
	})
}
