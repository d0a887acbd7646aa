package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// noticesAbout returns the notices recorded about webhook id, oldest first, as "type to kind, kind".
func noticesAbout(t *testing.T, db bun.IDB, id int64) []string {
	t.Helper()
	var evs []model.Event
	if err := db.NewSelect().Model(&evs).Where("about_webhook_id = ?", id).OrderExpr("id").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		var kinds []string
		err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN webhooks AS w ON w.id = d.webhook_id").
			ColumnExpr("w.kind").Where("d.event_id = ?", ev.ID).OrderExpr("w.id").Scan(context.Background(), &kinds)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s to %v", ev.EventType, kinds))
	}
	return out
}

// newChannel registers a notification endpoint of kind for the account, wanting types (nil: the
// default).
func newChannel(t *testing.T, db bun.IDB, accountID int64, v model.Variant, kind string, types *string) *model.Webhook {
	t.Helper()
	now := model.Now()
	c := &model.Webhook{AccountID: accountID, Variant: v, Kind: kind, URL: "https://ops.example.com/" + kind, NoticeTypes: types,
		Status: v.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(context.Background(), db, c, 10); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNoticesOfAFailureAndARecovery: the exhaustion that moves a webhook into failing records
// webhook.failing, to the owner's e-mail (made on first use) and to the channels that want it; the
// first success after it records webhook.recovered once, and starts the quiet period, in which the
// next failure is kept quiet and counted; when the period ends, a webhook that still fails is told,
// with the count.
func TestNoticesOfAFailureAndARecovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		variantsOf(t, func(t *testing.T, v model.Variant, eventType string) {
			ctx := context.Background()
			_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("notices-%s@example.com", v), "")
			w := newWebhook(t, db, acc.ID, v, eventType)
			newChannel(t, db, acc.ID, v, model.KindNoticeWebhook, nil)
			exhaustedOnly := "delivery.exhausted"
			newChannel(t, db, acc.ID, v, model.KindNoticeChat, &exhaustedOnly)
			rules := notices.Rules{Quiet: time.Hour, PublicURL: "https://hooks.example.com/"}
			base := model.Now().Add(-time.Minute)

			d1 := failedDelivery(t, db, w, base)
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d1, WebhookID: w.ID, LastAttemptAt: base,
				LastError: &model.NoticeError{Class: "http_status", Message: "receiver answered 500"}}, rules); err != nil {
				t.Fatal(err)
			}
			// A second exhaustion of the same failure is no transition.
			d2 := failedDelivery(t, db, w, base.Add(time.Second))
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d2, WebhookID: w.ID, LastAttemptAt: base.Add(time.Second)}, rules); err != nil {
				t.Fatal(err)
			}
			// The chat wants delivery.exhausted: the first at once, the second held by the account
			// rule for the summary at the end of the account's quiet period (TestAccountRule).
			want := []string{
				"webhook.failing to [notice-webhook notice-email]",
				"delivery.exhausted to [notice-chat]", "delivery.exhausted to []",
			}
			if got := noticesAbout(t, db, w.ID); !slices.Equal(got, want) {
				t.Fatalf("notices after two exhaustions = %v, want %v", got, want)
			}
			var failing model.Event
			if err := db.NewSelect().Model(&failing).Where("about_webhook_id = ?", w.ID).Where("event_type = ?", model.NoticeFailing).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			var data model.NoticeData
			if err := json.Unmarshal([]byte(failing.Data), &data); err != nil {
				t.Fatal(err)
			}
			if data.WebhookID != w.ID || data.URL != w.URL || data.AccountID != acc.ID || data.Variant != v || data.FailureCount != 1 ||
				data.LastError == nil || data.LastError.Message != "receiver answered 500" ||
				data.PortalURL != fmt.Sprintf("https://hooks.example.com/portal/webhooks/%d", w.ID) {
				t.Errorf("webhook.failing data = %+v", data)
			}

			// Two successes: one recovery.
			for n := range 2 {
				attemptWith(t, db, w, d1, 2+n, true, base.Add(time.Duration(2+n)*time.Second), rules)
			}
			// Failing again within the quiet period: counted, not told.
			d3 := failedDelivery(t, db, w, base.Add(5*time.Second))
			if res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d3, WebhookID: w.ID, LastAttemptAt: base.Add(5 * time.Second)}, rules); err != nil || res.Alert {
				t.Fatalf("exhaustion in the quiet period = %+v, %v; want no alert", res, err)
			}
			want = append(want, "webhook.recovered to [notice-webhook notice-email]", "delivery.exhausted to []")
			if got := noticesAbout(t, db, w.ID); !slices.Equal(got, want) {
				t.Fatalf("notices after the recovery and a quiet failure = %v, want %v", got, want)
			}
			if got := reload(t, db, w.ID); got.SuppressedNotices != 1 || got.Status != v.Spec().FailingStatus {
				t.Fatalf("quiet failure: suppressed %d, status %s; want 1 and the failing status", got.SuppressedNotices, got.Status)
			}

			// Not over yet: nothing. Over: the failure is told, summarising.
			if got, err := model.EndQuietPeriods(ctx, db, rules, 10); err != nil || len(got) != 0 {
				t.Fatalf("EndQuietPeriods before the end = %v, %v", got, err)
			}
			if _, err := db.NewUpdate().Model((*model.Webhook)(nil)).Set("quiet_until = ?", model.Now().Add(-time.Second)).Where("id = ?", w.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			ended, err := model.EndQuietPeriods(ctx, db, rules, 10)
			if err != nil || len(ended) != 1 || ended[0].Event.EventType != model.NoticeFailing {
				t.Fatalf("EndQuietPeriods after the end = %v, %v; want webhook.failing", ended, err)
			}
			if err := json.Unmarshal([]byte(ended[0].Event.Data), &data); err != nil || data.Suppressed != 1 {
				t.Fatalf("deferred webhook.failing: suppressed %d, %v; want 1", data.Suppressed, err)
			}
			if again, err := model.EndQuietPeriods(ctx, db, rules, 10); err != nil || len(again) != 0 {
				t.Fatalf("EndQuietPeriods again = %v, %v; want nothing", again, err)
			}
		})
	})
}

// TestOneFailingNoticeUnderConcurrentExhaustions: 50 deliveries of one webhook exhausted at once
// record one webhook.failing.
func TestOneFailingNoticeUnderConcurrentExhaustions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "storm@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		at := model.Now().Add(-time.Minute)
		var deliveries []int64
		for range 50 {
			deliveries = append(deliveries, failedDelivery(t, db, w, at))
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(deliveries))
		for _, d := range deliveries {
			wg.Go(func() {
				_, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: at}, notices.Rules{})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := noticesAbout(t, db, w.ID); !slices.Equal(got, []string{"webhook.failing to [notice-email]"}) {
			t.Fatalf("notices = %v, want one webhook.failing", got)
		}
	})
}

// TestNoticesAboutChannels: a notification endpoint that fails is told to the owner's e-mail
// alone, never to another channel; the e-mail's own failure is told to nobody.
func TestNoticesAboutChannels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "channels@example.com", "")
		ops := newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeWebhook, nil)
		newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeChat, nil)
		hook := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		// fail exhausts a notice about hook delivered to the channel w.
		fail := func(w *model.Webhook) {
			t.Helper()
			ev, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: model.NoticeFailing,
				Data: `{}`, Notice: hook.ID, Channels: []model.Webhook{*w}})
			if err != nil {
				t.Fatal(err)
			}
			d := ev.Deliveries[0].ID
			attempt(t, db, w, d, 1, false, model.Now())
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: model.Now()}, notices.Rules{}); err != nil {
				t.Fatal(err)
			}
		}
		fail(ops)
		if got, want := noticesAbout(t, db, ops.ID), []string{"webhook.failing to [notice-email]"}; !slices.Equal(got, want) {
			t.Fatalf("notices about the operational webhook = %v, want %v", got, want)
		}
		var email model.Webhook
		if err := db.NewSelect().Model(&email).Where("account_id = ?", acc.ID).Where("kind = ?", model.KindNoticeEmail).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		fail(&email)
		if got := noticesAbout(t, db, email.ID); len(got) != 0 {
			t.Fatalf("notices about the e-mail = %v, want none", got)
		}
	})
}

// TestDisablingWarning: an exhaustion within the warning before the rule disables a webhook
// records webhook.disabling once, saying when; the exhaustion that disables records
// webhook.disabled by the rule; an enable starts afresh, with webhook.enabled.
func TestDisablingWarning(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "warning@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		rules := notices.Rules{Disable: notices.DisableRule{After: 10 * time.Hour, MinExhausted: 3}, WarnBefore: 4 * time.Hour}
		since := model.Now().Add(-7 * time.Hour) // inside the warning: it starts 6 hours in
		for n := range 3 {
			at := since.Add(time.Duration(n) * time.Second)
			d := failedDelivery(t, db, w, at)
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: at}, rules); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"webhook.failing to [notice-email]", "webhook.disabling to [notice-email]"}
		if got := noticesAbout(t, db, w.ID); !slices.Equal(got, want) {
			t.Fatalf("notices = %v, want %v", got, want)
		}
		// Past the rule's time: the next exhaustion disables.
		if _, err := db.NewUpdate().Model((*model.Webhook)(nil)).Set("failing_since = ?", model.Now().Add(-11*time.Hour)).Where("id = ?", w.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		at := model.Now().Add(-time.Second)
		d := failedDelivery(t, db, w, at)
		if res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: at}, rules); err != nil || !res.Disabled {
			t.Fatalf("exhaustion past the rule = %+v, %v; want disabled", res, err)
		}
		scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}
		if _, _, err := model.EnableWebhook(ctx, db, scope, w.ID, model.ActorPortal, rules, model.Now()); err != nil {
			t.Fatal(err)
		}
		want = append(want, "webhook.disabled to [notice-email]", "webhook.enabled to [notice-email]")
		if got := noticesAbout(t, db, w.ID); !slices.Equal(got, want) {
			t.Fatalf("notices = %v, want %v", got, want)
		}
		if got := reload(t, db, w.ID); got.WarnedAt != nil || got.AlertedAt != nil {
			t.Fatalf("after enable: warned %v, alerted %v; want a fresh start", got.WarnedAt, got.AlertedAt)
		}
	})
}

// TestOneEmailChannelUnderConcurrentFirstNotices: the first notices of ten webhooks of one account,
// recorded at once, make one e-mail channel, and each notice goes to it.
func TestOneEmailChannelUnderConcurrentFirstNotices(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "first-notices@example.com", "")
		at := model.Now().Add(-time.Minute)
		type exhaustion struct{ webhook, delivery int64 }
		var all []exhaustion
		for range 10 {
			w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
			all = append(all, exhaustion{w.ID, failedDelivery(t, db, w, at)})
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(all))
		start := make(chan struct{})
		for _, e := range all {
			wg.Go(func() {
				<-start
				_, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: e.delivery, WebhookID: e.webhook, LastAttemptAt: at}, notices.Rules{})
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		n, err := db.NewSelect().Model((*model.Webhook)(nil)).Where("account_id = ?", acc.ID).Where("kind = ?", model.KindNoticeEmail).Count(ctx)
		if err != nil || n != 1 {
			t.Fatalf("%d e-mail channels (%v), want one", n, err)
		}
		for _, e := range all {
			if got := noticesAbout(t, db, e.webhook); !slices.Equal(got, []string{"webhook.failing to [notice-email]"}) {
				t.Errorf("webhook %d: notices %v", e.webhook, got)
			}
		}
	})
}
