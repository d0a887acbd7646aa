package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

var auditRow = regexp.MustCompile(`<tr id="audit-(\d+)">\s*<td>[^<]*</td>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>`)

// TestAuditPage: the changes made in the portal are each recorded once with the session as their
// actor, without a header's value; the audit page lists them newest first, escaped, to a
// read-only session too, and never another account's.
func TestAuditPage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		post := func(path string, form url.Values) {
			t.Helper()
			form.Set("csrf", csrf)
			rec := e.do(t, "POST", path, cookie, form)
			if rec.Code >= 400 {
				t.Fatalf("POST %s = %d:\n%s", path, rec.Code, rec.Body)
			}
		}
		post("/portal/webhooks", url.Values{"url": {"https://receiver.example.com/a"}, "eventType": {v.EventTypes()[0]}})
		hooks, err := model.ListWebhooks(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, model.WebhookFilter{Limit: 10})
		if err != nil || len(hooks) != 1 {
			t.Fatalf("webhooks %v, %v", hooks, err)
		}
		hook := "/portal/webhooks/" + strconv.FormatInt(hooks[0].ID, 10)
		headerValue := "portal-header-value-" + string(v)
		post(hook+"/url", url.Values{"url": {"https://receiver.example.com/b?x=1&y=2"}})
		post(hook+"/headers", url.Values{"do": {"save"}, "headers": {"X-Token: " + headerValue}})
		post(hook+"/rotate", url.Values{})
		post(hook+"/disable", url.Values{})
		post(hook+"/enable", url.Values{})
		post(hook+"/delete", url.Values{})

		var sessions []model.PortalSession
		if err := e.db.NewSelect().Model(&sessions).Where("account_id = ?", account.ID).Scan(t.Context()); err != nil || len(sessions) != 1 {
			t.Fatalf("sessions %v, %v", sessions, err)
		}
		who := fmt.Sprintf("portal session %d (read-write)", sessions[0].ID)
		want := []string{"webhook.delete", "webhook.enable", "webhook.disable", "webhook.secret.rotate", "webhook.settings", "webhook.update", "webhook.create"}

		readOnly := e.enter(t, e.link(t, account.ID, v, true))
		for _, c := range []*http.Cookie{cookie, readOnly} {
			rec := e.do(t, "GET", "/portal/audit", c, nil)
			expect(t, rec, http.StatusOK)
			body := rec.Body.String()
			rows := auditRow.FindAllStringSubmatch(body, -1)
			if len(rows) != len(want) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), body)
			}
			last := int64(1 << 62)
			for i, r := range rows {
				id, _ := strconv.ParseInt(r[1], 10, 64)
				if r[3] != want[i] || r[2] != who || id >= last {
					t.Errorf("row %d: %s by %q (id %d), want %s by %q, newest first", i, r[3], r[2], id, want[i], who)
				}
				last = id
			}
			if strings.Contains(body, headerValue) || strings.Contains(body, `"url":`) || !strings.Contains(body, `&#34;url&#34;`) || !strings.Contains(body, `x=1&amp;y=2`) {
				t.Errorf("the page shows a header value or unescaped changes:\n%s", body)
			}
			if !strings.Contains(body, `href="/portal/audit"`) {
				t.Errorf("no link to the audit page in the navigation")
			}
		}

		// Another account's session sees none of it.
		other := e.account(t)
		rec := e.do(t, "GET", "/portal/audit", e.enter(t, e.link(t, other.ID, v, false)), nil)
		expect(t, rec, http.StatusOK)
		if rows := auditRow.FindAllStringSubmatch(rec.Body.String(), -1); len(rows) != 0 || !strings.Contains(rec.Body.String(), "No changes") {
			t.Errorf("another account's audit page lists %d rows", len(rows))
		}
		expect(t, e.do(t, "GET", "/portal/audit?before=x", cookie, nil), http.StatusBadRequest)
	})
}
