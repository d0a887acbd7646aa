package model_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// noticeDeliveries counts the deliveries of the notices of type typ of an account by the kind of
// channel they go to.
func noticeDeliveries(t *testing.T, db bun.IDB, account int64, typ string) map[string]int {
	t.Helper()
	var kinds []string
	err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").Join("JOIN webhooks AS w ON w.id = d.webhook_id").
		ColumnExpr("w.kind").Where("e.account_id = ?", account).Where("e.event_type = ?", typ).Where("e.about_webhook_id IS NOT NULL").
		Scan(context.Background(), &kinds)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, k := range kinds {
		out[k]++
	}
	return out
}

// exhaustAll exhausts one failed delivery of each webhook at once, as their workflows would.
func exhaustAll(t *testing.T, db bun.IDB, hooks []*model.Webhook, at time.Time, rules notices.Rules) {
	t.Helper()
	deliveries := make([]int64, len(hooks))
	for i, w := range hooks {
		deliveries[i] = failedDelivery(t, db, w, at)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(hooks))
	start := make(chan struct{})
	for i, w := range hooks {
		wg.Go(func() {
			<-start
			_, err := model.MarkExhausted(context.Background(), db, model.Exhaustion{DeliveryID: deliveries[i], WebhookID: w.ID, LastAttemptAt: at}, rules)
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
}

// TestAccountStormIsOneNoticeToPeople: 50 webhooks of one account fail at once (issue 41, defect
// 6). The operational webhook gets a webhook.failing per webhook; the e-mail and the chat, read by
// people, get the first at once and the others in one summary when the account's quiet period ends.
// Another account's failure at the same moment is told to its owner at once.
func TestAccountStormIsOneNoticeToPeople(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "storm-account@example.com", "")
		_, calm, _ := model.CreateAPIKey(ctx, db, "calm-account@example.com", "")
		newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeWebhook, nil)
		newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeChat, nil)
		rules := notices.Rules{Quiet: time.Hour}
		var hooks []*model.Webhook
		for range 50 {
			hooks = append(hooks, newWebhook(t, db, acc.ID, model.VariantA, "campaign.created"))
		}
		calmHook := newWebhook(t, db, calm.ID, model.VariantA, "campaign.created")
		exhaustAll(t, db, append(hooks, calmHook), model.Now().Add(-time.Minute), rules)

		want := map[string]int{model.KindNoticeWebhook: 50, model.KindNoticeEmail: 1, model.KindNoticeChat: 1}
		if got := noticeDeliveries(t, db, acc.ID, model.NoticeFailing); !maps.Equal(got, want) {
			t.Fatalf("webhook.failing deliveries by channel = %v, want %v", got, want)
		}
		if got := noticeDeliveries(t, db, calm.ID, model.NoticeFailing); !maps.Equal(got, map[string]int{model.KindNoticeEmail: 1}) {
			t.Fatalf("the other account's webhook.failing deliveries = %v, want its e-mail's one", got)
		}

		// The period ends; two replicas' sweepers find it at once: one summary of the 49 others.
		endQuiet(t, db, acc.ID)
		var wg sync.WaitGroup
		results := make(chan []*model.PublishResult, 2)
		for range 2 {
			wg.Go(func() {
				got, err := model.EndAccountQuietPeriods(ctx, db, rules, 10)
				if err != nil {
					t.Error(err)
				}
				results <- got
			})
		}
		wg.Wait()
		close(results)
		var summaries []*model.PublishResult
		for r := range results {
			summaries = append(summaries, r...)
		}
		if len(summaries) != 1 || len(summaries[0].Deliveries) != 2 {
			t.Fatalf("summaries = %v, want one, to the chat and the e-mail", summaries)
		}
		want[model.KindNoticeEmail], want[model.KindNoticeChat] = 2, 2
		if got := noticeDeliveries(t, db, acc.ID, model.NoticeFailing); !maps.Equal(got, want) {
			t.Fatalf("webhook.failing deliveries by channel after the period = %v, want %v", got, want)
		}
		d := model.DecodeNoticeData(summaries[0].Event)
		told := map[int64]bool{}
		for _, e := range d.Summary.Listed {
			told[e.WebhookID] = true
		}
		if d.Summary.Notices != 49 || d.Summary.Webhooks != 49 || len(told) != 49 || told[calmHook.ID] {
			t.Fatalf("summary = %+v, want the 49 webhooks of the account not told at once", d.Summary)
		}
	})
}

// endQuiet moves the end of every account quiet period of account into the past.
func endQuiet(t *testing.T, db bun.IDB, account int64) {
	t.Helper()
	if _, err := db.NewUpdate().Table("notice_quiet").Set("quiet_until = ?", model.Now().Add(-time.Second)).
		Where("account_id = ?", account).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAccountRule: within an account's quiet period, the e-mail and chat get the first notice of a
// type at once and the others in one summary at its end, which begins a new period; the
// operational webhook gets each at once. A recovery of a webhook whose failure is still held is not
// told to people (they were not told of the failure; the summary gives its status then); a period
// that held nothing ends without a word, and the next notice is told at once.
func TestAccountRule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "account-rule@example.com", "")
		newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeWebhook, nil)
		newChannel(t, db, acc.ID, model.VariantA, model.KindNoticeChat, nil)
		rules := notices.Rules{Quiet: time.Hour, PublicURL: "https://hooks.example.com"}
		var hooks []*model.Webhook
		base := model.Now().Add(-time.Minute)
		fail := func(w *model.Webhook, at time.Time) {
			t.Helper()
			d := failedDelivery(t, db, w, at)
			if _, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: at,
				LastError: &model.NoticeError{Class: "http_status", Message: fmt.Sprintf("receiver %d answered 503", w.ID)}}, rules); err != nil {
				t.Fatal(err)
			}
		}
		const told, held = "webhook.failing to [notice-webhook notice-chat notice-email]", "webhook.failing to [notice-webhook]"
		for i := range 7 {
			hooks = append(hooks, newWebhook(t, db, acc.ID, model.VariantA, "campaign.created"))
			if i < 5 {
				fail(hooks[i], base)
			}
		}
		for i, want := range []string{told, held, held, held, held} {
			if got := noticesAbout(t, db, hooks[i].ID); !slices.Equal(got, []string{want}) {
				t.Fatalf("webhook %d: notices %v, want %q", i, got, want)
			}
		}
		if got, err := model.EndAccountQuietPeriods(ctx, db, rules, 10); err != nil || len(got) != 0 {
			t.Fatalf("before the end of the period: %v, %v; want nothing", got, err)
		}

		// The first recovers: told to all (the first recovery of the period). The second, whose
		// failure people have not heard of yet, recovers: told to the operational webhook alone.
		d := deliveryFor(t, db, acc.ID, hooks[0])
		attemptWith(t, db, hooks[0], d, 1, true, base.Add(time.Second), rules)
		d = deliveryFor(t, db, acc.ID, hooks[1])
		attemptWith(t, db, hooks[1], d, 1, true, base.Add(time.Second), rules)
		if got := noticesAbout(t, db, hooks[0].ID); !slices.Equal(got, []string{told, "webhook.recovered to [notice-webhook notice-chat notice-email]"}) {
			t.Fatalf("recovery told at once: %v", got)
		}
		if got := noticesAbout(t, db, hooks[1].ID); !slices.Equal(got, []string{held, "webhook.recovered to [notice-webhook]"}) {
			t.Fatalf("recovery of a failure held: %v", got)
		}

		// The failing period ends (not the recovered one): the summary names the four held, in
		// order, each with its status now and its last error; a new period begins.
		if _, err := db.NewUpdate().Table("notice_quiet").Set("quiet_until = ?", model.Now().Add(-time.Second)).
			Where("account_id = ?", acc.ID).Where("event_type = ?", model.NoticeFailing).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		summaries, err := model.EndAccountQuietPeriods(ctx, db, rules, 10)
		if err != nil || len(summaries) != 1 || summaries[0].Event.EventType != model.NoticeFailing || len(summaries[0].Deliveries) != 2 {
			t.Fatalf("summaries = %v, %v; want one webhook.failing, to the chat and the e-mail", summaries, err)
		}
		s := model.DecodeNoticeData(summaries[0].Event)
		if s.Summary == nil || s.Summary.Notices != 4 || s.Summary.Webhooks != 4 || len(s.Summary.Listed) != 4 || s.Summary.Since.IsZero() ||
			s.WebhookID != hooks[1].ID || *summaries[0].Event.AboutWebhookID != hooks[1].ID || s.PortalURL != "https://hooks.example.com/portal/" {
			t.Fatalf("summary = %+v (%+v)", s, s.Summary)
		}
		for i, e := range s.Summary.Listed {
			w := hooks[i+1]
			status := model.StatusFailed
			if i == 0 {
				status = model.StatusProcessing // recovered since
			}
			if e.WebhookID != w.ID || e.URL != w.URL || e.EventType != w.EventType || e.Status != status || e.Notices != 1 ||
				e.LastError == nil || e.LastError.Message != fmt.Sprintf("receiver %d answered 503", w.ID) ||
				e.PortalURL != fmt.Sprintf("https://hooks.example.com/portal/webhooks/%d", w.ID) {
				t.Errorf("listed %d = %+v, want webhook %d, status %s", i, e, w.ID, status)
			}
		}
		if again, err := model.EndAccountQuietPeriods(ctx, db, rules, 10); err != nil || len(again) != 0 {
			t.Fatalf("again: %v, %v; want nothing", again, err)
		}

		// In the new period a failure is held; both periods end: its summary, and the recovered
		// period, which held nothing, ends without one.
		fail(hooks[5], base.Add(2*time.Second))
		if got := noticesAbout(t, db, hooks[5].ID); !slices.Equal(got, []string{held}) {
			t.Fatalf("a failure in the period that a summary began: %v, want it held", got)
		}
		endQuiet(t, db, acc.ID)
		summaries, err = model.EndAccountQuietPeriods(ctx, db, rules, 10)
		if err != nil || len(summaries) != 1 || model.DecodeNoticeData(summaries[0].Event).Summary.Listed[0].WebhookID != hooks[5].ID {
			t.Fatalf("summaries = %v, %v; want one, of webhook %d", summaries, err, hooks[5].ID)
		}
		// That summary began a period of its own, which ends with nothing held: no period is left,
		// and the next failure is told at once.
		endQuiet(t, db, acc.ID)
		if got, err := model.EndAccountQuietPeriods(ctx, db, rules, 10); err != nil || len(got) != 0 {
			t.Fatalf("a period that held nothing: %v, %v; want no summary", got, err)
		}
		if n, err := db.NewSelect().Table("notice_quiet").Where("account_id = ?", acc.ID).Count(ctx); err != nil || n != 0 {
			t.Fatalf("%d periods left (%v), want none", n, err)
		}
		fail(hooks[6], base.Add(3*time.Second))
		if got := noticesAbout(t, db, hooks[6].ID); !slices.Equal(got, []string{told}) {
			t.Fatalf("a failure after the periods: %v, want it told at once", got)
		}
	})
}
