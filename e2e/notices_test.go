//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/smtptest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
)

// addChannel registers a notification endpoint of kind ("webhook" or "chat") at url through the
// API, for the account of st's key in variant, and returns its id and, for an operational webhook,
// its secret.
func addChannel(t *testing.T, st *stack, variant, kind, url string) (int64, string) {
	t.Helper()
	status, body, _ := st.call(t, variant, "POST", collection(variant)+"/notification-endpoints", map[string]string{"url": url, "kind": kind})
	if status != http.StatusCreated {
		t.Fatalf("create notification endpoint: %d %v", status, body)
	}
	d := body["data"].(map[string]any)
	secret, _ := d["secret"].(string)
	return int64(d["id"].(float64)), secret
}

// notice is one notice as an operational webhook received it.
type notice struct {
	Type      string           `json:"type"`
	Timestamp string           `json:"timestamp"`
	Data      model.NoticeData `json:"data"`
	id        string
	at        time.Time
}

// noticesAt decodes the notices path received, in order, those about webhook (0: all).
func noticesAt(t *testing.T, rc *receiver, path string, webhook int64) []notice {
	t.Helper()
	var out []notice
	for _, r := range rc.requests(path) {
		var n notice
		if err := json.Unmarshal(r.Body, &n); err != nil {
			t.Fatalf("%s: %v: %s", path, err, r.Body)
		}
		n.id, n.at = r.Header.Get("Webhook-Id"), r.At
		if webhook == 0 || n.Data.WebhookID == webhook {
			out = append(out, n)
		}
	}
	return out
}

func noticeTypes(ns []notice) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type)
	}
	return out
}

// TestHealthNotices: a receiver fails until its webhook goes failing, then recovers. The owner's
// e-mail, an operational webhook and a chat each get exactly one webhook.failing and one
// webhook.recovered; the operational webhook's are signed as Standard Webhooks says (checked by an
// independent implementation in Node.js) and carry the webhook, the account, the last error and
// the failure count; the chat's are one line of text.
func TestHealthNotices(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}})
	var failing atomic.Bool
	failing.Store(true)
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/flaky" && failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	_, secret := addChannel(t, st, "A", "webhook", st.rc.url("/ops"))
	addChannel(t, st, "A", "chat", st.rc.url("/chat"))
	hook, _ := st.createWebhook(t, "A", st.rc.url("/flaky"), "campaign.created")

	st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 60*time.Second, "webhook.failing at every channel", func() bool {
		return len(st.rc.requests("/ops")) == 1 && len(st.rc.requests("/chat")) == 1 && len(st.mb.Messages()) == 1
	})
	failing.Store(false)
	st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 60*time.Second, "webhook.recovered at every channel", func() bool {
		return len(st.rc.requests("/ops")) == 2 && len(st.rc.requests("/chat")) == 2 && len(st.mb.Messages()) == 2
	})
	// More successes, and time for anything sent twice to arrive: nothing more.
	st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "third event delivered", func() bool { return len(st.rc.requests("/flaky")) == 4 })
	time.Sleep(2 * time.Second) // a wait for a notice that must not come, not for async work to finish

	ops := noticesAt(t, st.rc, "/ops", 0)
	if got := noticeTypes(ops); !slices.Equal(got, []string{"webhook.failing", "webhook.recovered"}) {
		t.Fatalf("operational webhook got %v, want one webhook.failing, one webhook.recovered", got)
	}
	acc, _, _ := model.Authenticate(context.Background(), st.db, st.key)
	f := ops[0].Data
	if f.WebhookID != hook || f.AccountID != acc.ID || f.Variant != model.VariantA || f.URL != st.rc.url("/flaky") ||
		f.FailureCount != 1 || f.LastError == nil || f.LastError.Class != "http_status" || f.LastError.StatusCode == nil ||
		*f.LastError.StatusCode != 500 || f.Status != model.StatusFailed {
		t.Errorf("webhook.failing data = %+v", f)
	}
	if r := ops[1].Data; r.WebhookID != hook || r.Status != model.StatusProcessing || r.FailureCount != 0 {
		t.Errorf("webhook.recovered data = %+v", r)
	}
	var checks []any
	for _, r := range st.rc.requests("/ops") {
		checks = append(checks, map[string]any{"body": string(r.Body), "secret": secret, "standard": map[string]string{
			"id": r.Header.Get("Webhook-Id"), "timestamp": r.Header.Get("Webhook-Timestamp"), "signature": r.Header.Get("Webhook-Signature")}})
	}
	for i, answer := range runVerifier(t, checks) {
		if answer != "ok" {
			t.Errorf("notice %d: Standard Webhooks verification: %s", i, answer)
		}
	}
	for i, r := range st.rc.requests("/chat") {
		var chat map[string]string
		if err := json.Unmarshal(r.Body, &chat); err != nil || len(chat) != 1 || !strings.Contains(chat["text"], fmt.Sprintf("webhook %d", hook)) {
			t.Errorf("chat message %d = %s (%v), want {\"text\": one line naming webhook %d}", i, r.Body, err, hook)
		}
	}
	mails := st.mb.Messages()
	if failingMail, recoveredMail := mails[0].Text(t), mails[1].Text(t); !strings.Contains(failingMail, fmt.Sprintf("webhook %d is failing", hook)) ||
		!strings.Contains(recoveredMail, "webhook.recovered") {
		t.Errorf("mails:\n%s\n---\n%s", failingMail, recoveredMail)
	}
}

// TestOperationalEndpointDownIsToldByEmail: an operational webhook that is itself down fails its
// notices through its schedule; its owner is told by e-mail, and no notice about it reaches any
// other channel.
func TestOperationalEndpointDownIsToldByEmail(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}})
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/flaky" || path == "/ops-down" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	down, _ := addChannel(t, st, "A", "webhook", st.rc.url("/ops-down"))
	addChannel(t, st, "A", "chat", st.rc.url("/chat"))
	hook, _ := st.createWebhook(t, "A", st.rc.url("/flaky"), "campaign.created")
	st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 60*time.Second, "the owner told of the webhook and of the operational endpoint", func() bool {
		return len(st.mb.Messages()) == 2
	})
	time.Sleep(2 * time.Second) // a wait for a notice that must not come
	var subjects []string
	for _, m := range st.mb.Messages() {
		subjects = append(subjects, strings.SplitN(m.Text(t), "\n", 2)[0])
	}
	want := []string{
		fmt.Sprintf("Subject: [webhookd] webhook %d is failing (campaign.created)", hook),
		fmt.Sprintf("Subject: [webhookd] notification endpoint %d: webhook.failing", down),
	}
	if !slices.Equal(subjects, want) {
		t.Fatalf("mails = %q, want %q", subjects, want)
	}
	chat := st.rc.requests("/chat")
	if len(chat) != 1 || !strings.Contains(string(chat[0].Body), fmt.Sprintf("webhook %d", hook)) {
		t.Fatalf("chat got %d messages, want the webhook's failing alone (none about the operational endpoint)", len(chat))
	}
	if n := len(st.rc.requests("/ops-down")); n != 2 {
		t.Fatalf("the operational endpoint got %d attempts, want its schedule's 2", n)
	}
}

// TestConcurrentFailuresGiveOneNotice: 50 deliveries of one webhook fail at once; its owner is told
// once.
func TestConcurrentFailuresGiveOneNotice(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}})
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/storm" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	addChannel(t, st, "A", "webhook", st.rc.url("/ops"))
	hook, _ := st.createWebhook(t, "A", st.rc.url("/storm"), "campaign.created")
	for range 50 {
		st.publish(t, "A", "campaign.created", campaign)
	}
	eventually(t, 2*time.Minute, "all 50 deliveries exhausted", func() bool {
		return countStates(t, st.db, hook)[model.DeliveryExhausted] == 50
	})
	eventually(t, 30*time.Second, "webhook.failing", func() bool { return len(st.rc.requests("/ops")) >= 1 })
	time.Sleep(2 * time.Second) // a wait for a notice that must not come
	if got := noticeTypes(noticesAt(t, st.rc, "/ops", hook)); !slices.Equal(got, []string{"webhook.failing"}) {
		t.Fatalf("notices = %v, want one webhook.failing", got)
	}
	if n := len(st.mb.Messages()); n != 1 {
		t.Fatalf("%d e-mails, want one", n)
	}
}

// TestDisablingWarnsFirst: with a short auto-disable rule, a failing webhook's owner is warned
// (webhook.disabling, saying when) before it is disabled (webhook.disabled, by the rule), once each.
func TestDisablingWarnsFirst(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{100 * time.Millisecond},
		disable: notices.DisableRule{After: 4 * time.Second, MinExhausted: 1}, warnBefore: 2 * time.Second})
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/dying" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	addChannel(t, st, "A", "webhook", st.rc.url("/ops"))
	hook, _ := st.createWebhook(t, "A", st.rc.url("/dying"), "campaign.created")
	// One event a second: each is exhausted about 0.2 s later, and the rule is judged then.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(noticeTypes(noticesAt(t, st.rc, "/ops", hook)), "webhook.disabled") {
		if time.Now().After(deadline) {
			t.Fatalf("not disabled within 30 s; notices %v", noticeTypes(noticesAt(t, st.rc, "/ops", hook)))
		}
		st.publish(t, "A", "campaign.created", campaign)
		time.Sleep(time.Second) // the pace of the events, not a wait for async work
	}
	time.Sleep(2 * time.Second) // a wait for a notice that must not come
	ns := noticesAt(t, st.rc, "/ops", hook)
	if got := noticeTypes(ns); !slices.Equal(got, []string{"webhook.failing", "webhook.disabling", "webhook.disabled"}) {
		t.Fatalf("notices = %v, want webhook.failing, webhook.disabling, webhook.disabled", got)
	}
	if w, d := ns[1].Data, ns[2].Data; w.DisableAt == nil || d.By != model.ActorRule {
		t.Fatalf("warning %+v, disable %+v: want a disableAt, then by %q", w, d, model.ActorRule)
	}
}

// TestNoticeSurvivesKill: webhookd is killed with SIGKILL as soon as the transitions of ten failing
// webhooks are committed, before or while their notices are sent; started again, it sends every
// webhook.failing, each once or twice under one webhook-id, none lost.
func TestNoticeSurvivesKill(t *testing.T) {
	besideOthers(t)
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if strings.HasPrefix(path, "/dead/") {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	db := openTestDB(t, dbURL)
	p, apiURL := startWebhookd(t, bin, dbURL, "notice-kill", tsrv, rc,
		"WEBHOOKD_RETRY_SCHEDULE=100ms", "WEBHOOKD_DELIVERY_TIMEOUT=1s", "WEBHOOKD_SWEEP_INTERVAL=250ms", "WEBHOOKD_LOG_LEVEL=warn")
	key, acc, err := model.CreateAPIKey(context.Background(), db, "notice-kill@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{apiURL: apiURL, db: db, rc: rc, key: key}
	addChannel(t, st, "A", "webhook", rc.url("/ops"))
	const hooks = 10
	for i := range hooks {
		st.createWebhook(t, "A", rc.url(fmt.Sprintf("/dead/%d", i)), "campaign.created")
	}
	st.publish(t, "A", "campaign.created", campaign)
	notices := func() int {
		n, err := db.NewSelect().Model((*model.Event)(nil)).Where("account_id = ?", acc.ID).Where("event_type = ?", model.NoticeFailing).Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	eventually(t, time.Minute, "the first transition committed", func() bool { return notices() > 0 })
	p.kill(t)
	committed, received := notices(), len(rc.requests("/ops"))
	t.Logf("killed with %d of %d webhook.failing committed and %d received", committed, hooks, received)
	p.start(t)
	eventually(t, 2*time.Minute, "every webhook.failing after the restart", func() bool {
		ids := map[string]bool{}
		for _, n := range noticesAt(t, rc, "/ops", 0) {
			ids[n.id] = true
		}
		return len(ids) == hooks
	})
	time.Sleep(2 * time.Second) // a wait for a copy that must not come
	byID := map[string]int{}
	byWebhook := map[int64]map[string]bool{}
	for _, n := range noticesAt(t, rc, "/ops", 0) {
		if n.Type != model.NoticeFailing {
			t.Fatalf("unexpected notice %s", n.Type)
		}
		byID[n.id]++
		if byWebhook[n.Data.WebhookID] == nil {
			byWebhook[n.Data.WebhookID] = map[string]bool{}
		}
		byWebhook[n.Data.WebhookID][n.id] = true
	}
	twice := 0
	for id, n := range byID {
		if n > 2 {
			t.Errorf("notice %s arrived %d times", id, n)
		}
		if n == 2 {
			twice++
		}
	}
	for w, ids := range byWebhook {
		if len(ids) != 1 {
			t.Errorf("webhook %d: webhook.failing under %d ids, want one", w, len(ids))
		}
	}
	t.Logf("after the kill: %d of %d webhook.failing arrived, %d of them twice under one id, 0 lost", len(byID), hooks, twice)
	if len(byWebhook) != hooks {
		t.Fatalf("notices about %d webhooks, want %d", len(byWebhook), hooks)
	}
}

// TestNoticeLatency measures the time from a transition to its notice at an operational webhook
// (the notice's data.at, recorded in the transition's transaction, to its receipt) over 120
// transitions: 60 webhooks of variant B whose test events fail (webhook.failing at once, spec 3.2),
// then an event that each delivers (webhook.recovered). It logs the figures; timing is no pass or
// fail condition. Each transition gives exactly one notice.
func TestNoticeLatency(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{time.Hour}})
	var failing atomic.Bool
	failing.Store(true)
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if strings.HasPrefix(path, "/flap/") && failing.Load() {
			w.WriteHeader(http.StatusBadGateway)
		}
	})
	addChannel(t, st, "B", "webhook", st.rc.url("/ops"))
	const hooks = 60
	for i := range hooks {
		st.createWebhook(t, "B", st.rc.url(fmt.Sprintf("/flap/%d", i)), "lead.captured")
	}
	eventually(t, 2*time.Minute, "60 webhook.failing", func() bool { return len(st.rc.requests("/ops")) >= hooks })
	failing.Store(false)
	st.publish(t, "B", "lead.captured", sampleData["lead.captured"])
	eventually(t, 2*time.Minute, "60 webhook.recovered", func() bool { return len(st.rc.requests("/ops")) >= 2*hooks })
	time.Sleep(2 * time.Second) // a wait for a notice that must not come

	ns := noticesAt(t, st.rc, "/ops", 0)
	count := map[string]int{}
	var latencies []time.Duration
	for _, n := range ns {
		count[n.Type]++
		latencies = append(latencies, n.at.Sub(n.Data.At))
		if d := n.at.Sub(n.Data.At); d > 5*time.Second {
			t.Logf("slow: %s about webhook %d (%s): %v", n.Type, n.Data.WebhookID, n.id, d)
		}
	}
	if len(ns) != 2*hooks || count[model.NoticeFailing] != hooks || count[model.NoticeRecovered] != hooks {
		t.Fatalf("notices = %v (%d in all), want %d webhook.failing and %d webhook.recovered", count, len(ns), hooks, hooks)
	}
	slices.Sort(latencies)
	pick := func(q float64) time.Duration { return latencies[int(q*float64(len(latencies)-1))] }
	t.Logf("transition to notice over %d transitions: p50 %v, p99 %v, max %v",
		len(latencies), pick(0.50).Round(time.Millisecond), pick(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
}

// noticeDeliveriesSettled reports whether every delivery of the notices of account has ended
// (delivered or exhausted): what the notices' channels will receive has arrived.
func noticeDeliveriesSettled(t *testing.T, db *model.DB, account int64) bool {
	t.Helper()
	n, err := db.NewSelect().TableExpr("deliveries AS d").Join("JOIN events AS e ON e.id = d.event_id").
		Where("e.account_id = ?", account).Where("e.about_webhook_id IS NOT NULL").
		Where("d.state NOT IN (?, ?)", model.DeliveryDelivered, model.DeliveryExhausted).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// TestAccountStormGivesOneMailAndOneChatPost: one receiver goes down under the 50 webhooks of an
// account (issue 41, defect 6). The operational webhook, a machine, gets one webhook.failing per
// webhook; the owner's e-mail and chat get the first failure at once and, when the account's quiet
// period ends, one summary that names the 49 others: two e-mails and two chat posts in all, not 50
// of each. Another account's failure in the same minute reaches its owner at once. The quiet period
// is an hour; the test ends it by moving its end into the past, as the sweeper then finds it.
func TestAccountStormGivesOneMailAndOneChatPost(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{200 * time.Millisecond}, quiet: time.Hour})
	st.rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if strings.HasPrefix(path, "/down/") {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	ctx := context.Background()
	acc, _, err := model.Authenticate(ctx, st.db, st.key)
	if err != nil {
		t.Fatal(err)
	}
	addChannel(t, st, "A", "webhook", st.rc.url("/ops"))
	addChannel(t, st, "A", "chat", st.rc.url("/chat"))
	const hooks = 50
	urls := map[int64]string{}
	for i := range hooks {
		u := st.rc.url(fmt.Sprintf("/down/%d/", i)) // no URL a prefix of another
		id, _ := st.createWebhook(t, "A", u, "campaign.created")
		urls[id] = u
	}
	otherKey, otherAcc, err := model.CreateAPIKey(ctx, st.db, "other@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	other := *st
	other.key = otherKey
	otherHook, _ := other.createWebhook(t, "A", st.rc.url("/down/other"), "campaign.created")

	mailsTo := func(to string) []smtptest.Mail {
		var out []smtptest.Mail
		for _, m := range st.mb.Messages() {
			if slices.Contains(m.To, to) {
				out = append(out, m)
			}
		}
		return out
	}
	started := time.Now()
	st.publish(t, "A", "campaign.created", campaign)
	other.publish(t, "A", "campaign.created", campaign)
	eventually(t, 2*time.Minute, "a webhook.failing per webhook at the operational webhook", func() bool {
		return len(noticesAt(t, st.rc, "/ops", 0)) >= hooks
	})
	eventually(t, time.Minute, "every notice delivered", func() bool {
		return noticeDeliveriesSettled(t, st.db, acc.ID) && noticeDeliveriesSettled(t, st.db, otherAcc.ID)
	})
	owner, chat := mailsTo("owner@example.com"), st.rc.requests("/chat")
	t.Logf("50 failing webhooks, within the quiet period (%v): %d e-mails and %d chat posts to the owner, %d webhook.failing at the operational webhook",
		time.Since(started).Round(time.Millisecond), len(owner), len(chat), len(noticesAt(t, st.rc, "/ops", 0)))
	if got := noticeTypes(noticesAt(t, st.rc, "/ops", 0)); len(got) != hooks || slices.ContainsFunc(got, func(s string) bool { return s != model.NoticeFailing }) {
		t.Fatalf("operational webhook got %v, want %d webhook.failing, one per webhook", got, hooks)
	}
	if len(owner) != 1 || len(chat) != 1 {
		t.Fatalf("the owner got %d e-mails and %d chat posts in the quiet period, want the first failure's one of each", len(owner), len(chat))
	}
	first := owner[0].Text(t)
	if !strings.Contains(first, "is failing") {
		t.Fatalf("first e-mail:\n%s", first)
	}
	if got := mailsTo("other@example.com"); len(got) != 1 || !strings.Contains(got[0].Text(t), fmt.Sprintf("webhook %d is failing", otherHook)) {
		t.Fatalf("the other account's owner got %d e-mails, want its webhook's failing at once", len(got))
	}

	// The period ends: one summary of the 49 others, to the e-mail and the chat.
	if _, err := st.db.NewUpdate().Table("notice_quiet").Set("quiet_until = ?", model.Now().Add(-time.Second)).
		Where("account_id = ?", acc.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the summary at the e-mail and the chat", func() bool {
		return len(mailsTo("owner@example.com")) == 2 && len(st.rc.requests("/chat")) == 2
	})
	eventually(t, time.Minute, "every notice delivered", func() bool { return noticeDeliveriesSettled(t, st.db, acc.ID) })
	owner, chat = mailsTo("owner@example.com"), st.rc.requests("/chat")
	if len(owner) != 2 || len(chat) != 2 {
		t.Fatalf("after the quiet period the owner got %d e-mails and %d chat posts in all, want 2 of each", len(owner), len(chat))
	}
	summary := owner[1].Text(t)
	var post map[string]string
	if err := json.Unmarshal(chat[1].Body, &post); err != nil {
		t.Fatal(err)
	}
	named := 0
	for id, u := range urls {
		if strings.Contains(first, u) {
			continue // the first failure, told at once
		}
		if !strings.Contains(summary, fmt.Sprintf("webhook %d, campaign.created, %s: status \"failed\" now", id, u)) {
			t.Errorf("the summary e-mail does not name webhook %d (%s)", id, u)
		}
		if strings.Contains(post["text"], u+",") {
			named++
		}
	}
	if !strings.Contains(summary, "49 webhooks") || named != 20 || !strings.Contains(post["text"], "and 29 more") {
		t.Errorf("summary e-mail:\n%s\nchat post (names %d webhooks): %s", summary, named, post["text"])
	}
	t.Logf("after the quiet period: %d e-mails and %d chat posts in all; the summary e-mail: %q; chat: %.200s...",
		len(owner), len(chat), strings.SplitN(summary, "\n", 2)[0], post["text"])
}
