package model_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// exhaust marks a delivery exhausted under a rule that never disables, and reports the alert.
func exhaust(ctx context.Context, db bun.IDB, deliveryID, webhookID int64, at time.Time) (bool, error) {
	res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: deliveryID, WebhookID: webhookID, LastAttemptAt: at}, notices.Rules{Disable: notices.DisableRule{}})
	return res.Alert, err
}

// failedDelivery stores a delivery for w whose one attempt, started at at, failed.
func failedDelivery(t *testing.T, db bun.IDB, w *model.Webhook, at time.Time) int64 {
	t.Helper()
	d := deliveryFor(t, db, w.AccountID, w)
	attempt(t, db, w, d, 1, false, at)
	return d
}

func alertedAt(t *testing.T, db bun.IDB, id int64) sql.NullTime {
	t.Helper()
	var at sql.NullTime
	if err := db.NewSelect().Table("webhooks").Column("alerted_at").Where("id = ?", id).Scan(context.Background(), &at); err != nil {
		t.Fatal(err)
	}
	return at
}

func variantsOf(t *testing.T, fn func(t *testing.T, v model.Variant, eventType string)) {
	for _, v := range []struct {
		v         model.Variant
		eventType string
	}{{model.VariantA, "campaign.created"}, {model.VariantB, "lead.captured"}} {
		t.Run(string(v.v), func(t *testing.T) { fn(t, v.v, v.eventType) })
	}
}

// TestFailureRecord: failing_since is the start of the oldest failure since the last success,
// exhausted_count the exhaustions since then; a success clears both, and an exhaustion older than
// the last success or reported twice counts once or not at all.
func TestFailureRecord(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		variantsOf(t, func(t *testing.T, v model.Variant, eventType string) {
			ctx := context.Background()
			_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("record-%s@example.com", v), "")
			w := newWebhook(t, db, acc.ID, v, eventType)
			base := model.Now().Add(-time.Hour)

			d1 := failedDelivery(t, db, w, base)
			d2 := failedDelivery(t, db, w, base.Add(time.Minute))
			if got := reload(t, db, w.ID); got.FailingSince == nil || !got.FailingSince.Equal(base) || got.ExhaustedCount != 0 {
				t.Fatalf("after two failures: failing since %v, exhausted %d; want %v, 0", got.FailingSince, got.ExhaustedCount, base)
			}
			for _, d := range []int64{d1, d2, d2} { // d2 twice, as a retried activity would
				if _, err := exhaust(ctx, db, d, w.ID, base.Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			if got := reload(t, db, w.ID); got.ExhaustedCount != 2 || !got.FailingSince.Equal(base) {
				t.Fatalf("after exhausting two deliveries (one reported twice): exhausted %d, since %v; want 2, %v", got.ExhaustedCount, got.FailingSince, base)
			}

			attempt(t, db, w, deliveryFor(t, db, acc.ID, w), 1, true, base.Add(2*time.Minute))
			if got := reload(t, db, w.ID); got.FailingSince != nil || got.ExhaustedCount != 0 {
				t.Fatalf("after a success: failing since %v, exhausted %d; want nil, 0", got.FailingSince, got.ExhaustedCount)
			}
			// A delivery whose last attempt came before the success is not part of a new failure.
			stale := deliveryFor(t, db, acc.ID, w)
			if _, err := exhaust(ctx, db, stale, w.ID, base.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if got := reload(t, db, w.ID); got.ExhaustedCount != 0 || got.FailingSince != nil {
				t.Fatalf("a stale exhaustion counted: exhausted %d, since %v", got.ExhaustedCount, got.FailingSince)
			}
			next := base.Add(3 * time.Minute)
			failedDelivery(t, db, w, next)
			if got := reload(t, db, w.ID); got.FailingSince == nil || !got.FailingSince.Equal(next) {
				t.Fatalf("a failure after the success: failing since %v, want %v", got.FailingSince, next)
			}
		})
	})
}

// TestAutoDisableRule: an exhaustion disables the webhook exactly when it has failed without a
// success for at least After and at least MinExhausted deliveries are exhausted; the call that
// disables reports Disabled and not Alert, so the owner gets one e-mail per move.
func TestAutoDisableRule(t *testing.T) {
	cases := []struct {
		name         string
		rule         notices.DisableRule
		failingFor   time.Duration // how long before now the first failed attempt started
		exhaustions  int
		wantDisabled int // the 1-based exhaustion that disables; 0 for none
	}{
		{"both conditions hold", notices.DisableRule{After: time.Hour, MinExhausted: 3}, 2 * time.Hour, 4, 3},
		{"one exhaustion moves and disables at once", notices.DisableRule{After: time.Hour, MinExhausted: 1}, 2 * time.Hour, 2, 1},
		{"not before After", notices.DisableRule{After: time.Hour, MinExhausted: 1}, 50 * time.Minute, 4, 0},
		{"not below MinExhausted", notices.DisableRule{After: time.Hour, MinExhausted: 5}, 100 * time.Hour, 4, 0},
		{"never with a zero After", notices.DisableRule{After: 0, MinExhausted: 1}, 1000 * time.Hour, 4, 0},
	}
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				variantsOf(t, func(t *testing.T, v model.Variant, eventType string) {
					ctx := context.Background()
					_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("rule-%d-%s@example.com", i, v), "")
					w := newWebhook(t, db, acc.ID, v, eventType)
					start := model.Now().Add(-tc.failingFor)
					for n := 1; n <= tc.exhaustions; n++ {
						at := start.Add(time.Duration(n) * time.Millisecond)
						res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: failedDelivery(t, db, w, at), WebhookID: w.ID, LastAttemptAt: at}, notices.Rules{Disable: tc.rule})
						if err != nil {
							t.Fatal(err)
						}
						want := model.ExhaustResult{Alert: n == 1 && tc.wantDisabled != 1, Disabled: n == tc.wantDisabled}
						if res.Alert != want.Alert || res.Disabled != want.Disabled {
							t.Fatalf("exhaustion %d = %+v, want %+v", n, res, want)
						}
					}
					got := reload(t, db, w.ID)
					failing := map[model.Variant]string{model.VariantA: model.StatusFailed, model.VariantB: model.StatusFailing}[v]
					switch {
					case tc.wantDisabled == 0:
						if got.Disabled() || got.Status != failing {
							t.Fatalf("webhook disabled %v, status %s; want enabled and %s", got.DisabledAt, got.Status, failing)
						}
					default:
						wantStatus := map[model.Variant]string{model.VariantA: model.StatusFailed, model.VariantB: model.StatusDisabled}[v]
						if !got.Disabled() || got.DisabledReason == nil || *got.DisabledReason != model.DisabledAuto || got.Status != wantStatus {
							t.Fatalf("webhook disabled at %v (%v), status %s; want disabled (auto), status %s", got.DisabledAt, got.DisabledReason, got.Status, wantStatus)
						}
					}
					if got.ExhaustedCount != tc.exhaustions {
						t.Fatalf("exhausted count %d, want %d", got.ExhaustedCount, tc.exhaustions)
					}
				})
			})
		}
	})
}

// TestAutoDisableOnceUnderConcurrency: exhaustions that race each other disable the webhook once
// and count every delivery; no failing alert goes out beside the disable e-mail.
func TestAutoDisableOnceUnderConcurrency(t *testing.T) {
	const n = 12
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		for _, min := range []int{1, n} {
			t.Run(fmt.Sprintf("MinExhausted=%d", min), func(t *testing.T) {
				ctx := context.Background()
				_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("race-%d@example.com", min), "")
				w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
				at := model.Now().Add(-6 * 24 * time.Hour)
				deliveries := make([]int64, n)
				for i := range deliveries {
					deliveries[i] = failedDelivery(t, db, w, at)
				}
				rule := notices.DisableRule{After: 120 * time.Hour, MinExhausted: min}
				var wg sync.WaitGroup
				start := make(chan struct{})
				results := make(chan model.ExhaustResult, n)
				errs := make(chan error, n)
				for _, d := range deliveries {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: at}, notices.Rules{Disable: rule})
						if err != nil {
							errs <- err
							return
						}
						results <- res
					}()
				}
				close(start)
				wg.Wait()
				close(results)
				close(errs)
				for err := range errs {
					t.Fatalf("exhaust: %v", err)
				}
				disabled, alerts := 0, 0
				for res := range results {
					if res.Disabled {
						disabled++
					}
					if res.Alert {
						alerts++
					}
				}
				// With MinExhausted n the first exhaustion moves into failing and alerts; the last
				// one to count disables. With 1 the first one disables and nothing else alerts.
				wantAlerts := map[int]int{1: 0, n: 1}[min]
				if disabled != 1 || alerts != wantAlerts {
					t.Fatalf("%d calls disabled and %d alerted; want 1 and %d", disabled, alerts, wantAlerts)
				}
				if got := reload(t, db, w.ID); got.ExhaustedCount != n || !got.Disabled() || got.Status != model.StatusDisabled {
					t.Fatalf("after the race: exhausted %d, disabled %v, status %s", got.ExhaustedCount, got.DisabledAt, got.Status)
				}
			})
		}
	})
}

// TestDisableAndEnable: the owner's disable and enable, the manual retry's re-enable and a URL
// update, in both variants.
func TestDisableAndEnable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		variantsOf(t, func(t *testing.T, v model.Variant, eventType string) {
			ctx := context.Background()
			_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("toggle-%s@example.com", v), "")
			_, other, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("toggle-other-%s@example.com", v), "")
			scope := model.WebhookScope{AccountID: acc.ID, Variant: v}
			w := newWebhook(t, db, acc.ID, v, eventType)
			wantDisabledStatus := map[model.Variant]string{model.VariantA: model.StatusPending, model.VariantB: model.StatusDisabled}[v]

			for _, s := range []model.WebhookScope{{AccountID: other.ID, Variant: v}, {AccountID: acc.ID, Variant: otherVariant(v)}} {
				if _, _, err := model.DisableWebhook(ctx, db, s, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); !errors.Is(err, model.ErrNotFound) {
					t.Fatalf("scope %+v disables the webhook: %v", s, err)
				}
				if _, _, err := model.EnableWebhook(ctx, db, s, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); !errors.Is(err, model.ErrNotFound) {
					t.Fatalf("scope %+v enables the webhook: %v", s, err)
				}
			}
			if reload(t, db, w.ID).Disabled() {
				t.Fatal("another scope disabled the webhook")
			}

			off, _, err := model.DisableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now())
			if err != nil || !off.Disabled() || *off.DisabledReason != model.DisabledManual || off.Status != wantDisabledStatus || !off.UpdatedAt.After(w.UpdatedAt) {
				t.Fatalf("disable = %+v, %v", off, err)
			}
			again, _, err := model.DisableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now())
			if err != nil || !again.DisabledAt.Equal(*off.DisabledAt) || !again.UpdatedAt.Equal(off.UpdatedAt) {
				t.Fatalf("disabling again moved disabled_at %v -> %v (%v)", off.DisabledAt, again.DisabledAt, err)
			}
			if got := listStatus(t, db, scope, model.StatusDisabled); v == model.VariantB && got != 1 {
				t.Fatalf("status filter disabled lists %d, want 1", got)
			}

			// A success of an attempt already under way leaves it disabled.
			failedDelivery(t, db, w, model.Now().Add(-time.Minute))
			attempt(t, db, w, deliveryFor(t, db, acc.ID, w), 1, true, model.Now())
			if got := reload(t, db, w.ID); !got.Disabled() || (v == model.VariantB && got.Status != model.StatusDisabled) {
				t.Fatalf("a success enabled the webhook: disabled %v, status %s", got.DisabledAt, got.Status)
			}

			// Enable is a fresh start: the failure record and the alert are cleared.
			d := failedDelivery(t, db, w, model.Now())
			if _, err := db.NewUpdate().Table("webhooks").Set("alerted_at = ?", model.Now()).Where("id = ?", w.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: model.Now()}, notices.Rules{Disable: notices.DisableRule{}}); err != nil {
				t.Fatal(err)
			}
			before := reload(t, db, w.ID)
			on, _, err := model.EnableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now())
			if err != nil || on.Disabled() || on.DisabledReason != nil || on.FailingSince != nil || on.ExhaustedCount != 0 || alertedAt(t, db, w.ID).Valid {
				t.Fatalf("enable = %+v (alerted %v), %v; before %+v", on, alertedAt(t, db, w.ID), err, before)
			}
			if wantStatus := map[model.Variant]string{model.VariantA: before.Status, model.VariantB: model.StatusActive}[v]; on.Status != wantStatus {
				t.Fatalf("status after enable = %s, want %s", on.Status, wantStatus)
			}
			if again, _, err := model.EnableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil || !again.UpdatedAt.Equal(on.UpdatedAt) {
				t.Fatalf("enabling again changed the webhook: %+v, %v", again, err)
			}
			// The next move into failing alerts again.
			at := model.Now()
			if alert, err := exhaust(ctx, db, failedDelivery(t, db, w, at), w.ID, at); err != nil || !alert {
				t.Fatalf("first exhaustion after enable alerted %v, %v; want an alert", alert, err)
			}

			// A manual retry re-enables in both variants, as enable does.
			if _, _, err := model.DisableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil {
				t.Fatal(err)
			}
			if err := model.ReenableWebhook(ctx, db, w.ID); err != nil {
				t.Fatal(err)
			}
			if got := reload(t, db, w.ID); got.Disabled() || got.ExhaustedCount != 0 || alertedAt(t, db, w.ID).Valid || (v == model.VariantB && got.Status != model.StatusActive) {
				t.Fatalf("after the retry's re-enable: %+v", got)
			}

			// A new URL is a new receiver: enabled, with a clean record.
			if _, _, err := model.DisableWebhook(ctx, db, scope, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil {
				t.Fatal(err)
			}
			failedDelivery(t, db, w, model.Now())
			updated, err := model.UpdateWebhookURL(ctx, db, scope, w.ID, "https://new.example.com/", model.SettingsChange{}, model.Now())
			if err != nil || updated.Disabled() || updated.DisabledReason != nil || updated.FailingSince != nil || updated.Status != v.InitialStatus() {
				t.Fatalf("URL update = %+v, %v", updated, err)
			}
		})
	})
}

// TestDisabledWebhooksKeepTheirEvents: a disabled webhook still gets a delivery per event, held
// for a manual retry, and the gauge counts it as disabled in both variants.
func TestDisabledWebhooksKeepTheirEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "kept@example.com", "")
		for _, v := range []struct {
			v         model.Variant
			eventType string
		}{{model.VariantA, "campaign.created"}, {model.VariantB, "lead.captured"}} {
			w := newWebhook(t, db, acc.ID, v.v, v.eventType)
			newWebhook(t, db, acc.ID, v.v, v.eventType)
			if _, _, err := model.DisableWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: v.v}, w.ID, model.ActorAPI, notices.Rules{}, model.Now()); err != nil {
				t.Fatal(err)
			}
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: v.v, EventType: v.eventType, Data: `{}`})
			if err != nil || len(res.Deliveries) != 2 || res.Deliveries[0].WebhookID != w.ID {
				t.Fatalf("%s: fan-out with a disabled webhook = %+v, %v", v.v, res, err)
			}
		}
		counts, err := model.CountWebhooksByStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, c := range counts {
			got[string(c.Variant)+"/"+c.Status] += c.Count
		}
		want := map[string]int64{"A/pending": 1, "A/disabled": 1, "B/active": 1, "B/disabled": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counts = %v, want %v", got, want)
		}
	})
}

func otherVariant(v model.Variant) model.Variant {
	if v == model.VariantA {
		return model.VariantB
	}
	return model.VariantA
}

func listStatus(t *testing.T, db bun.IDB, scope model.WebhookScope, status string) int {
	t.Helper()
	hooks, err := model.ListWebhooks(context.Background(), db, scope, model.WebhookFilter{Status: status, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return len(hooks)
}
