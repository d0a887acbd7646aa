package audit_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestChangesJSON: a plain change writes its old and new values, null included; a redacted one
// writes that it changed and nothing else, whatever values it was handed.
func TestChangesJSON(t *testing.T) {
	b, err := json.Marshal(audit.Changes{
		"rateLimit": audit.Changed(nil, 5),
		"headers":   audit.Redacted(),
		"secret":    {Old: "whsec_old", New: "whsec_new", Redacted: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"headers":{"redacted":true},"rateLimit":{"new":5},"secret":{"redacted":true}}`; string(b) != want {
		t.Fatalf("changes = %s, want %s", b, want)
	}
}

// TestActorOf: a context carries the actor a front door put in it; one without is the system's.
func TestActorOf(t *testing.T) {
	if a := audit.ActorOf(context.Background()); a != (audit.Actor{Kind: model.ActorKindSystem}) {
		t.Fatalf("no actor: %+v, want the system", a)
	}
	ctx := audit.WithActor(context.Background(), audit.APIKey(3, "ops@example.com"))
	if a := audit.ActorOf(ctx); a != (audit.Actor{Kind: model.ActorKindAPIKey, ID: "3", Label: "ops@example.com"}) {
		t.Fatalf("api key actor: %+v", a)
	}
	if a := audit.Portal(12, true); a.Kind != model.ActorKindPortal || a.ID != "12" || a.Label != "read-only" {
		t.Fatalf("portal actor: %+v", a)
	}
}

// TestRecordKeepsTextAsTyped: an entry stores a value's text as it was typed, markup included
// (the portal escapes what it shows), never as \u003c.
func TestRecordKeepsTextAsTyped(t *testing.T) {
	db := dbtest.SQLite(t)
	_, account, err := model.CreateAPIKey(t.Context(), db, "typed@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	url := `https://r.example.com/"><script>alert(1)</script>&x`
	if err := audit.Record(t.Context(), db, account.ID, model.VariantA, audit.WebhookCreate, audit.TargetWebhook, "1", audit.Changes{"url": audit.Changed(nil, url)}); err != nil {
		t.Fatal(err)
	}
	page, err := model.ListAudit(t.Context(), db, model.WebhookScope{AccountID: account.ID, Variant: model.VariantA}, 0, 10)
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("entries: %+v, %v", page, err)
	}
	want, _ := json.Marshal(url)
	if got := page.Entries[0].Changes; got != `{"url":{"new":"https://r.example.com/\"><script>alert(1)</script>&x"}}` {
		t.Fatalf("changes stored as %s; want the URL as typed, not %s", got, want)
	}
}
