package model_test

import (
	"context"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestKeyScopes (issue 46): a key is issued with its scope, which Authenticate and ListAPIKeys
// tell; CreateAPIKey issues manage keys, as every key was before scopes; a scope that is not one of
// the three is refused before anything is written.
func TestKeyScopes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		plain := map[model.KeyScope]string{}
		for _, s := range model.KeyScopes {
			k, _, err := model.CreateScopedAPIKey(ctx, db, "scopes@example.com", string(s), s)
			if err != nil {
				t.Fatal(err)
			}
			plain[s] = k
		}
		old, _, err := model.CreateAPIKey(ctx, db, "scopes@example.com", "unscoped")
		if err != nil {
			t.Fatal(err)
		}
		plain["unscoped"] = old
		for name, k := range plain {
			want := name
			if name == "unscoped" {
				want = model.ScopeManage
			}
			if _, got, err := model.Authenticate(ctx, db, k); err != nil || got.Scope != want || got.ID == 0 {
				t.Errorf("Authenticate(the %s key) = %+v, %v; want scope %s", name, got, err, want)
			}
		}
		keys, err := model.ListAPIKeys(ctx, db, "scopes@example.com")
		if err != nil || len(keys) != 4 {
			t.Fatalf("ListAPIKeys = %+v, %v", keys, err)
		}
		for i, want := range []model.KeyScope{model.ScopeRead, model.ScopePublish, model.ScopeManage, model.ScopeManage} {
			if keys[i].Scope != want {
				t.Errorf("key %q lists scope %q, want %q", keys[i].Name, keys[i].Scope, want)
			}
		}
		for _, bad := range []model.KeyScope{"", "admin", "Read"} {
			if _, _, err := model.CreateScopedAPIKey(ctx, db, "scopes@example.com", "bad", bad); err == nil {
				t.Errorf("scope %q was accepted", bad)
			}
		}
		if keys, _ := model.ListAPIKeys(ctx, db, "scopes@example.com"); len(keys) != 4 {
			t.Errorf("a refused scope wrote a key: %d keys", len(keys))
		}
	})
}

// TestMigrationKeepsKeysManage: migration 0023 gives every key issued before it the manage scope,
// so that it can do what it did; the database refuses a scope that is not one of the three.
func TestMigrationKeepsKeysManage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		key, _, err := model.CreateScopedAPIKey(ctx, db, "legacy-key@example.com", "", model.ScopeRead)
		if err != nil {
			t.Fatal(err)
		}
		// Back to the schema before 0023, with the key issued then.
		for _, stmt := range []string{
			"ALTER TABLE api_keys DROP COLUMN scope",
			"DELETE FROM schema_migrations WHERE version = '0023_key_scopes'",
		} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		if err := model.Migrate(ctx, db.DB); err != nil {
			t.Fatal(err)
		}
		if _, got, err := model.Authenticate(ctx, db, key); err != nil || got.Scope != model.ScopeManage {
			t.Fatalf("a key from before 0023 authenticates as %+v, %v; want scope manage", got, err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE api_keys SET scope = 'admin'"); err == nil {
			t.Fatal("the database took scope 'admin'")
		}
	})
}
