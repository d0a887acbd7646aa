package model_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// forEachBackend runs fn on every database backend of this run.
var forEachBackend = dbtest.ForEach

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- model.Migrate(ctx, db.DB)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent migrate: %v", err)
			}
		}
		files, err := filepath.Glob("migrations/*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("migration files: %v, %v", files, err)
		}
		n, err := db.NewSelect().Table("schema_migrations").Count(ctx)
		if err != nil || n != int64(len(files)) {
			t.Fatalf("schema_migrations rows = %d, %v; want %d, one per file", n, err, len(files))
		}
	})
}

func TestAPIKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		k1, a1, err := model.CreateAPIKey(ctx, db, "owner@example.com", "first")
		if err != nil {
			t.Fatal(err)
		}
		k2, a2, err := model.CreateAPIKey(ctx, db, "owner@example.com", "second")
		if err != nil {
			t.Fatal(err)
		}
		if a1.ID != a2.ID {
			t.Fatalf("same owner e-mail got two accounts: %d, %d", a1.ID, a2.ID)
		}
		if k1 == k2 || !strings.HasPrefix(k1, "whk_") || len(k1) < len("whk_")+22 {
			t.Fatalf("keys %q %q", k1, k2)
		}
		for _, k := range []string{k1, k2} {
			acc, _, err := model.Authenticate(ctx, db, k)
			if err != nil || acc.ID != a1.ID || acc.OwnerEmail != "owner@example.com" {
				t.Fatalf("Authenticate(%q) = %v, %v", k, acc, err)
			}
		}
		// Same lookup id, different rest: must fail the constant-time hash comparison.
		forged := k1[:len(k1)-4] + "AAAA"
		if forged == k1 {
			forged = k1[:len(k1)-4] + "BBBB"
		}
		for _, bad := range []string{"", "whk_", forged, "sk_live_" + k1[4:], k1 + "x"} {
			if _, _, err := model.Authenticate(ctx, db, bad); !errors.Is(err, model.ErrUnauthorized) {
				t.Fatalf("Authenticate(%q) err = %v, want ErrUnauthorized", bad, err)
			}
		}
		if _, _, err := model.CreateAPIKey(ctx, db, "not-an-email", ""); err == nil {
			t.Fatal("an owner e-mail without @ was accepted")
		}
	})
}

// TestAPIKeyListAndRevoke: an account's keys are listed without their secret part, revoked ones
// too; a revoked key fails Authenticate from the next call on while the account's other key still
// works; revoking again keeps the first time; unknown ids and owners are ErrNotFound.
func TestAPIKeyListAndRevoke(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		k1, acc, err := model.CreateAPIKey(ctx, db, "Keys@Example.com", "ci")
		if err != nil {
			t.Fatal(err)
		}
		k2, _, err := model.CreateAPIKey(ctx, db, "keys@example.com", "laptop")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := model.CreateAPIKey(ctx, db, "someone-else@example.com", "theirs"); err != nil {
			t.Fatal(err)
		}
		keys, err := model.ListAPIKeys(ctx, db, " KEYS@example.com ")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 2 || keys[0].Name != "ci" || keys[1].Name != "laptop" || keys[0].AccountID != acc.ID {
			t.Fatalf("ListAPIKeys = %+v, want the account's two keys, oldest first", keys)
		}
		if id := keys[0].KeyID(); !strings.HasPrefix(k1, id) || len(id) >= len(k1)/2 || keys[0].RevokedAt != nil {
			t.Fatalf("key id %q of key %q: want a short public prefix of it, not revoked", id, k1)
		}

		revoked, _, err := model.RevokeAPIKey(ctx, db, keys[0].ID)
		if err != nil || revoked.RevokedAt == nil || revoked.ID != keys[0].ID {
			t.Fatalf("RevokeAPIKey = %+v, %v", revoked, err)
		}
		if _, _, err := model.Authenticate(ctx, db, k1); !errors.Is(err, model.ErrUnauthorized) {
			t.Fatalf("Authenticate(revoked key) err = %v, want ErrUnauthorized", err)
		}
		if a, k, err := model.Authenticate(ctx, db, k2); err != nil || a.ID != acc.ID || k.ID != keys[1].ID {
			t.Fatalf("Authenticate(the other key) = %v, key %d, %v; want key %d", a, k.ID, err, keys[1].ID)
		}
		again, _, err := model.RevokeAPIKey(ctx, db, keys[0].ID)
		if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
			t.Fatalf("revoking twice: %+v, %v; want the first revocation time %v", again, err, revoked.RevokedAt)
		}
		keys, _ = model.ListAPIKeys(ctx, db, "keys@example.com")
		if len(keys) != 2 || keys[0].RevokedAt == nil || keys[1].RevokedAt != nil {
			t.Fatalf("after the revocation: %+v", keys)
		}
		if _, _, err := model.RevokeAPIKey(ctx, db, 999999); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("RevokeAPIKey(unknown) err = %v, want ErrNotFound", err)
		}
		if _, err := model.ListAPIKeys(ctx, db, "nobody@example.com"); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("ListAPIKeys(unknown owner) err = %v, want ErrNotFound", err)
		}
	})
}

func TestWebhookQueries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "hooks@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		_, other, err := model.CreateAPIKey(ctx, db, "other@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		now := model.Now()
		w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://a.example.com/", EventType: "campaign.created", Status: model.StatusPending, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
		if err := model.CreateWebhook(ctx, db, w, 2); err != nil {
			t.Fatal(err)
		}
		got, err := model.GetWebhook(ctx, db, scope, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(now) || got.URL != w.URL || got.FailureCount != 0 || got.LastStatus != nil {
			t.Fatalf("read back %+v, wrote %+v", got, w)
		}
		for _, s := range []model.WebhookScope{{AccountID: other.ID, Variant: model.VariantA}, {AccountID: acc.ID, Variant: model.VariantB}} {
			if _, err := model.GetWebhook(ctx, db, s, w.ID); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("scope %+v sees the webhook: %v", s, err)
			}
			if _, err := model.UpdateWebhookURL(ctx, db, s, w.ID, "https://evil.example.com/", model.SettingsChange{}, model.Now()); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("scope %+v updates the webhook: %v", s, err)
			}
			if err := model.DeleteWebhook(ctx, db, s, w.ID); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("scope %+v deletes the webhook: %v", s, err)
			}
		}
		updated, err := model.UpdateWebhookURL(ctx, db, scope, w.ID, "https://b.example.com/", model.SettingsChange{}, model.Now())
		if err != nil || updated.URL != "https://b.example.com/" || !updated.UpdatedAt.After(w.UpdatedAt) {
			t.Fatalf("update = %+v, %v", updated, err)
		}
		if err := model.DeleteWebhook(ctx, db, scope, w.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := model.GetWebhook(ctx, db, scope, w.ID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("deleted webhook readable: %v", err)
		}
		if _, err := model.UpdateWebhookURL(ctx, db, scope, w.ID, "https://c.example.com/", model.SettingsChange{}, model.Now()); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("deleted webhook updatable: %v", err)
		}
		if err := model.DeleteWebhook(ctx, db, scope, w.ID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("deleted webhook deleted twice: %v", err)
		}
	})
}

// TestWebhookLimitUnderConcurrency: concurrent creates never exceed the limit.
func TestWebhookLimitUnderConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "limit@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		const limit, tries = 5, 20
		var wg sync.WaitGroup
		results := make(chan error, tries)
		for i := 0; i < tries; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				now := model.Now()
				results <- model.CreateWebhook(ctx, db, &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: fmt.Sprintf("https://%d.example.com/", i), EventType: "lead.captured", Status: model.StatusActive, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}, limit)
			}(i)
		}
		wg.Wait()
		close(results)
		ok, refused := 0, 0
		for err := range results {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, model.ErrLimitReached):
				refused++
			default:
				t.Fatalf("create: %v", err)
			}
		}
		if ok != limit || refused != tries-limit {
			t.Fatalf("created %d, refused %d; want %d and %d", ok, refused, limit, tries-limit)
		}
	})
}
