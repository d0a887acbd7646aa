package model_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

func statusAt(t *testing.T, db bun.IDB, id int64) sql.NullTime {
	t.Helper()
	var at sql.NullTime
	if err := db.NewSelect().Table("webhooks").Column("status_at").Where("id = ?", id).Scan(context.Background(), &at); err != nil {
		t.Fatal(err)
	}
	return at
}

func intp(n int) *int { return &n }

// limitsOf renders a webhook's limits for comparison, "-" when unset.
func limitsOf(w *model.Webhook) [2]any {
	show := func(p *int) any {
		if p == nil {
			return "-"
		}
		return *p
	}
	return [2]any{show(w.RateLimit), show(w.MaxInFlight)}
}

// TestUpdateWebhookLimits: the per-endpoint limits are stored at create, changed one at a time (an
// unset change keeps, a nil one clears) without touching status, status_at, URL or the disabled
// state, only within the caller's scope and never on a deleted webhook. A URL update carries
// limits beside the URL.
func TestUpdateWebhookLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "limits@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "limits-other@example.com", "")
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
		now := model.Now()
		w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://limits.example.com/", EventType: "campaign.created",
			Status: model.StatusPending, Secret: "v1:x", CreatedAt: now, UpdatedAt: now, RateLimit: intp(5)}
		if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
			t.Fatal(err)
		}
		if got := reload(t, db, w.ID); limitsOf(got) != [2]any{5, "-"} {
			t.Fatalf("created limits = %v, want [5 -]", limitsOf(got))
		}
		// A failed, disabled webhook: a limit change must leave all of that as it is.
		if _, err := db.NewUpdate().Table("webhooks").Set("status = ?", model.StatusFailed).Set("status_at = ?", now).
			Where("id = ?", w.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := model.DisableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil {
			t.Fatal(err)
		}
		before := reload(t, db, w.ID)
		beforeStatusAt := statusAt(t, db, w.ID)

		for _, s := range []model.WebhookScope{{AccountID: other.ID, Variant: model.VariantA}, {AccountID: acc.ID, Variant: model.VariantB}} {
			if _, err := model.UpdateWebhookLimits(ctx, db, s, w.ID, model.SettingsChange{RateLimit: model.LimitChange{Set: true}}, model.Now()); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("scope %+v changes the limits: %v", s, err)
			}
			if _, err := model.UpdateWebhookLimits(ctx, db, s, w.ID, model.SettingsChange{}, model.Now()); !errors.Is(err, model.ErrNotFound) {
				t.Fatalf("scope %+v reads the webhook through an empty change: %v", s, err)
			}
		}
		if got := reload(t, db, w.ID); limitsOf(got) != [2]any{5, "-"} {
			t.Fatalf("limits after other scopes' changes = %v, want [5 -]", limitsOf(got))
		}

		same, err := model.UpdateWebhookLimits(ctx, db, scope, w.ID, model.SettingsChange{}, model.Now())
		if err != nil || limitsOf(same) != [2]any{5, "-"} || !same.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("empty change = %+v, %v; want the webhook unchanged", same, err)
		}

		later := before.UpdatedAt.Add(time.Millisecond) // updated_at is kept to the millisecond
		steps := []struct {
			change model.SettingsChange
			want   [2]any
		}{
			{model.SettingsChange{MaxInFlight: model.LimitChange{Set: true, To: intp(3)}}, [2]any{5, 3}},
			{model.SettingsChange{RateLimit: model.LimitChange{Set: true}}, [2]any{"-", 3}},
			{model.SettingsChange{RateLimit: model.LimitChange{Set: true, To: intp(10000)}, MaxInFlight: model.LimitChange{Set: true}}, [2]any{10000, "-"}},
		}
		for _, st := range steps {
			got, err := model.UpdateWebhookLimits(ctx, db, scope, w.ID, st.change, later)
			if err != nil {
				t.Fatal(err)
			}
			if limitsOf(got) != st.want || limitsOf(reload(t, db, w.ID)) != st.want {
				t.Fatalf("after %+v limits = %v (stored %v), want %v", st.change, limitsOf(got), limitsOf(reload(t, db, w.ID)), st.want)
			}
			if got.Status != model.StatusFailed || !got.Disabled() || got.URL != before.URL || !got.UpdatedAt.After(before.UpdatedAt) {
				t.Fatalf("a limit change touched more than the limits: %+v", got)
			}
			if at := statusAt(t, db, w.ID); at != beforeStatusAt {
				t.Fatalf("status_at moved from %v to %v", beforeStatusAt, at)
			}
		}

		// A URL update keeps unset limits and sets the others in the same statement.
		updated, err := model.UpdateWebhookURL(ctx, db, scope, w.ID, "https://limits2.example.com/", model.SettingsChange{MaxInFlight: model.LimitChange{Set: true, To: intp(2)}}, model.Now())
		if err != nil || limitsOf(updated) != [2]any{10000, 2} || updated.URL != "https://limits2.example.com/" || updated.Status != model.StatusPending {
			t.Fatalf("URL update with a limit = %+v, %v", updated, err)
		}

		if err := model.DeleteWebhook(ctx, db, scope, w.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := model.UpdateWebhookLimits(ctx, db, scope, w.ID, model.SettingsChange{RateLimit: model.LimitChange{Set: true, To: intp(1)}}, model.Now()); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("deleted webhook's limits changed: %v", err)
		}
		if got := reload(t, db, w.ID); limitsOf(got) != [2]any{10000, 2} {
			t.Fatalf("deleted webhook's limits = %v", limitsOf(got))
		}
	})
}
