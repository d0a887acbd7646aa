package webhooks_test

import (
	"errors"
	"testing"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
)

// TestCancelReplay (issue 46): a running replay canceled within its scope ends canceled, its counts
// kept, and the audit log records it once; canceled again, or from another account, nothing more
// happens.
func TestCancelReplay(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	_, acc, err := model.CreateAPIKey(t.Context(), db, "replay@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := model.CreateAPIKey(t.Context(), db, "other-replay@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
	r := &model.Replay{AccountID: acc.ID, Variant: model.VariantA, Criteria: `{"since":"2020-01-01T00:00:00Z","until":"2020-01-02T00:00:00Z","states":["exhausted"]}`}
	if err := model.CreateReplay(t.Context(), db, r, []int64{7, 8, 9}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelReplay(t.Context(), model.WebhookScope{AccountID: other.ID, Variant: model.VariantA}, r.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another account's cancel: %v, want ErrNotFound", err)
	}
	if _, err := s.CancelReplay(t.Context(), model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}, r.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another variant's cancel: %v, want ErrNotFound", err)
	}
	for range 2 {
		got, err := s.CancelReplay(t.Context(), scope, r.ID)
		if err != nil || got.State != model.ReplayCanceled || got.Matched != 3 || got.Remaining() != 3 || got.FinishedAt == nil {
			t.Fatalf("cancel: %+v, %v", got, err)
		}
	}
	page, err := model.ListAudit(t.Context(), db, scope, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range page.Entries {
		if e.Action == audit.ReplayCancel {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d replay.cancel entries, want 1: %+v", n, page.Entries)
	}
}
