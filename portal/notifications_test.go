package portal_test

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/secretbox"
)

// channelsOf lists an account's notification endpoints as stored.
func (e *env) channelsOf(t *testing.T, accountID int64, v model.Variant) []model.Webhook {
	t.Helper()
	chs, err := model.ListWebhooks(t.Context(), e.db, model.WebhookScope{AccountID: accountID, Variant: v, Channels: true}, model.WebhookFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return chs
}

// TestNotifications (issue 30): the notifications page lists the account's notices newest first
// and its channels, the e-mail included; its forms add a channel (an operational webhook's secret
// shown once), refuse what the API refuses, send a test to one channel and delete one, each with
// the session's CSRF token, on both variants and both databases.
func TestNotifications(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		if home := e.do(t, "GET", "/portal/", cookie, nil); !strings.Contains(home.Body.String(), `<a href="/portal/notifications">Notifications</a>`) {
			t.Fatalf("the navigation lacks the notifications page:\n%s", home.Body)
		}
		page := e.do(t, "GET", "/portal/notifications", cookie, nil)
		expect(t, page, http.StatusOK)
		body := page.Body.String()
		if !strings.Contains(body, "mailto:"+account.OwnerEmail) || !strings.Contains(body, "No notices yet") {
			t.Fatalf("the page lacks the e-mail channel or the empty notices:\n%s", body)
		}
		for _, nt := range model.NoticeTypes {
			checked := nt != model.NoticeExhausted
			box := `<input type="checkbox" name="types" value="` + nt + `"`
			if !strings.Contains(body, box) || strings.Contains(body, box+" checked") != checked {
				t.Fatalf("checkbox of %s (checked %v) wrong:\n%s", nt, checked, body)
			}
		}

		// Add an operational webhook: its secret shows once.
		form := url.Values{"csrf": {csrf}, "kind": {"webhook"}, "url": {"https://ops.example.com/notices"}, "types": {model.NoticeFailing, model.NoticeDisabled}}
		rec := e.do(t, "POST", "/portal/notifications/channels", cookie, form)
		expect(t, rec, http.StatusCreated)
		chs := e.channelsOf(t, account.ID, v)
		if len(chs) != 2 || chs[1].Kind != model.KindNoticeWebhook || chs[1].NoticeTypes == nil || *chs[1].NoticeTypes != "webhook.failing,webhook.disabled" {
			t.Fatalf("channels after the add: %+v", chs)
		}
		ops := chs[1]
		sealer, _ := secretbox.New(bytes.Repeat([]byte{7}, 32))
		secret, err := sealer.Open(ops.Secret)
		if err != nil || !strings.HasPrefix(secret, "whsec_") || !strings.Contains(html.UnescapeString(rec.Body.String()), secret) {
			t.Fatalf("the created page does not show the secret (%v):\n%s", err, rec.Body)
		}
		// A chat: no secret shown.
		rec = e.do(t, "POST", "/portal/notifications/channels", cookie, url.Values{"csrf": {csrf}, "kind": {"chat"}, "url": {"https://chat.example.com/in"}, "types": {model.NoticeFailing}})
		expect(t, rec, http.StatusCreated)
		if strings.Contains(rec.Body.String(), "whsec_") {
			t.Fatalf("a chat channel's page shows a secret:\n%s", rec.Body)
		}
		chat := e.channelsOf(t, account.ID, v)[2]

		// Refusals keep what was typed and say what is wrong.
		for _, c := range []struct {
			name string
			form url.Values
			says string
		}{
			{"no types", url.Values{"kind": {"chat"}, "url": {"https://chat2.example.com/in"}}, "Tick one or more notice types"},
			{"e-mail", url.Values{"kind": {"email"}, "url": {"https://chat2.example.com/in"}, "types": {model.NoticeFailing}}, "Pick a kind"},
			{"private", url.Values{"kind": {"webhook"}, "url": {"https://10.1.2.3/in"}, "types": {model.NoticeFailing}}, "cannot be used"},
			{"bad type", url.Values{"kind": {"webhook"}, "url": {"https://chat2.example.com/in"}, "types": {"webhook.exploded"}}, "Tick one or more notice types"},
		} {
			c.form.Set("csrf", csrf)
			rec := e.do(t, "POST", "/portal/notifications/channels", cookie, c.form)
			expect(t, rec, http.StatusUnprocessableEntity)
			if !strings.Contains(html.UnescapeString(rec.Body.String()), c.says) || !strings.Contains(rec.Body.String(), c.form.Get("url")) {
				t.Fatalf("%s: the page does not say %q with the URL kept:\n%s", c.name, c.says, rec.Body)
			}
		}
		rec = e.do(t, "POST", "/portal/notifications/channels", cookie, url.Values{"kind": {"chat"}, "url": {"https://chat3.example.com/"}, "types": {model.NoticeFailing}})
		expect(t, rec, http.StatusForbidden)
		if n := len(e.channelsOf(t, account.ID, v)); n != 3 {
			t.Fatalf("%d channels after refusals, want 3", n)
		}

		// A test goes to that channel alone, and the notices list shows it.
		rec = e.do(t, "POST", fmt.Sprintf("/portal/notifications/channels/%d/test", chat.ID), cookie, url.Values{"csrf": {csrf}})
		expect(t, rec, http.StatusOK)
		if !strings.Contains(rec.Body.String(), "A test notice") || !strings.Contains(rec.Body.String(), model.NoticeTest) {
			t.Fatalf("the test's answer:\n%s", rec.Body)
		}
		listed, err := model.ListNotices(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, 10)
		if err != nil || len(listed) != 1 || listed[0].EventType != model.NoticeTest || *listed[0].AboutWebhookID != chat.ID {
			t.Fatalf("notices after the test: %+v, %v", listed, err)
		}
		var to []int64
		if err := e.db.NewSelect().Model((*model.Delivery)(nil)).Column("webhook_id").Where("event_id = ?", listed[0].ID).Scan(t.Context(), &to); err != nil || len(to) != 1 || to[0] != chat.ID {
			t.Fatalf("the test's deliveries go to %v (%v), want channel %d alone", to, err, chat.ID)
		}

		// A notice about a webhook: listed first, linked to the webhook, in the chat's words.
		w := e.webhook(t, account.ID, v, "https://receiver.example.com/")
		if _, err := model.RecordNotice(t.Context(), e.db, notices.Rules{}, model.Notice{Type: model.NoticeFailing, Webhook: w}); err != nil {
			t.Fatal(err)
		}
		body = e.do(t, "GET", "/portal/notifications", cookie, nil).Body.String()
		failing, test := strings.Index(body, "<td>"+model.NoticeFailing+"</td>"), strings.Index(body, "<td>"+model.NoticeTest+"</td>")
		if failing < 0 || test < 0 || failing > test || !strings.Contains(body, fmt.Sprintf(`<a href="/portal/webhooks/%d">`, w.ID)) || !strings.Contains(body, "is failing") {
			t.Fatalf("the notices are not listed newest first with their webhook:\n%s", body)
		}

		// A summary of the account rule: about the endpoints it names, in the chat's words.
		quiet := notices.Rules{Quiet: time.Hour}
		for _, u := range []string{"https://receiver.example.com/first", "https://receiver.example.com/held"} {
			if _, err := model.RecordNotice(t.Context(), e.db, quiet, model.Notice{Type: model.NoticeFailing, Webhook: e.webhook(t, account.ID, v, u)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.db.NewUpdate().Table("notice_quiet").Set("quiet_until = ?", model.Now().Add(-time.Second)).Where("account_id = ?", account.ID).Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
		if summaries, err := model.EndAccountQuietPeriods(t.Context(), e.db, quiet, 10); err != nil || len(summaries) != 1 {
			t.Fatalf("summaries %v, %v; want one", summaries, err)
		}
		body = e.do(t, "GET", "/portal/notifications", cookie, nil).Body.String()
		if !strings.Contains(body, "<td>1 endpoint</td>") || !strings.Contains(body, "1 webhook moved to failing since") || !strings.Contains(body, "https://receiver.example.com/held") {
			t.Fatalf("the summary is not listed:\n%s", body)
		}

		// Delete the e-mail: it is gone, and not made again.
		email := e.channelsOf(t, account.ID, v)[0]
		rec = e.do(t, "POST", fmt.Sprintf("/portal/notifications/channels/%d/delete", email.ID), cookie, url.Values{"csrf": {csrf}})
		expect(t, rec, http.StatusSeeOther)
		if body := e.do(t, "GET", "/portal/notifications", cookie, nil).Body.String(); strings.Contains(body, "mailto:") {
			t.Fatalf("the e-mail is listed after its delete:\n%s", body)
		}
		if chs := e.channelsOf(t, account.ID, v); len(chs) != 2 {
			t.Fatalf("channels after deleting the e-mail: %+v", chs)
		}

		// Another account's channel, and a webhook's id, are not found.
		stranger := e.enter(t, e.link(t, e.account(t).ID, v, false))
		for _, path := range []string{fmt.Sprintf("/portal/notifications/channels/%d/test", chat.ID), fmt.Sprintf("/portal/notifications/channels/%d/delete", chat.ID)} {
			expect(t, e.do(t, "POST", path, stranger, url.Values{"csrf": {csrfOf(stranger)}}), http.StatusNotFound)
		}
		expect(t, e.do(t, "POST", fmt.Sprintf("/portal/notifications/channels/%d/delete", w.ID), cookie, url.Values{"csrf": {csrf}}), http.StatusNotFound)
		if chs := e.channelsOf(t, account.ID, v); len(chs) != 2 {
			t.Fatalf("channels after the refused deletes: %+v", chs)
		}
	})
}

// TestNotificationsReadOnly: a read-only session sees the notices and channels, and no form but
// signing out; every action is refused.
func TestNotificationsReadOnly(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		cookie := e.enter(t, e.link(t, account.ID, v, true))
		rec := e.do(t, "GET", "/portal/notifications", cookie, nil)
		expect(t, rec, http.StatusOK)
		body := logoutForm.ReplaceAllString(rec.Body.String(), "")
		if !strings.Contains(body, "mailto:") || strings.Contains(body, "<form") || strings.Contains(body, "<button") {
			t.Fatalf("read-only notifications page:\n%s", body)
		}
		email := e.channelsOf(t, account.ID, v)[0]
		for _, action := range []string{"/portal/notifications/channels", fmt.Sprintf("/portal/notifications/channels/%d/test", email.ID), fmt.Sprintf("/portal/notifications/channels/%d/delete", email.ID)} {
			rec := e.do(t, "POST", action, cookie, url.Values{"csrf": {csrfOf(cookie)}, "kind": {"chat"}, "url": {"https://chat.example.com/"}, "types": {model.NoticeFailing}})
			expect(t, rec, http.StatusForbidden)
		}
		if chs := e.channelsOf(t, account.ID, v); len(chs) != 1 {
			t.Fatalf("a read-only session changed the channels: %+v", chs)
		}
	})
}
