package portal_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestHeadersForm (issue 31): the endpoint page's headers form sets an endpoint's custom headers
// from "Name: value" lines, replaces them all, refuses a reserved one naming it (nothing saved,
// markup escaped), and removes them; no page ever shows a value, only its redacted form. Without
// the CSRF token, or in a read-only session, nothing changes.
func TestHeadersForm(t *testing.T) {
	const token = "tok-0123456789-abcd"
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		account, cookie, csrf, page := f.account, f.cookie, f.csrf, f.page
		path := page + "/headers"
		stored := func() *string { return f.stored().Headers }
		noValue := func(what, body string) {
			t.Helper()
			for _, value := range []string{token, "tenant-one", "other-secret-value"} {
				if shows(body, value) {
					t.Fatalf("%s shows the value %s:\n%s", what, value, body)
				}
			}
		}

		rec := e.do(t, "GET", page, cookie, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), "no custom headers") {
			t.Fatalf("the page of an endpoint without headers:\n%s", rec.Body)
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "headers": {"X-Api-Token: " + token + "\r\n\r\nX-Tenant: tenant-one\r\n"}})
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		noValue("the answer to a save", body)
		if s := stored(); s == nil || strings.Contains(*s, token) || !shows(body, "X-Api-Token") || !shows(body, "••••abcd") ||
			!shows(body, "X-Tenant") || !shows(body, "The headers were saved") {
			t.Fatalf("saved headers %v; the page:\n%s", s, body)
		}
		rec = e.do(t, "GET", page, cookie, nil)
		noValue("the page", rec.Body.String())
		if !shows(rec.Body.String(), "••••abcd") {
			t.Fatalf("the page does not list the headers:\n%s", rec.Body)
		}

		// Replace: the new lines are all the headers.
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "headers": {"Authorization: Bearer other-secret-value"}})
		expect(t, rec, http.StatusOK)
		noValue("the answer to a replace", rec.Body.String())
		if shows(rec.Body.String(), "X-Api-Token") || !shows(rec.Body.String(), "Authorization") {
			t.Fatalf("a replace's page:\n%s", rec.Body)
		}
		before := *stored()

		// Refusals: a reserved name, a line that is not a header; markup is escaped.
		for _, lines := range []string{"Webhook-Id: x", "User-Agent: me", "<script>alert(1)</script>", "X-<b>: " + token} {
			rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "headers": {lines}})
			expect(t, rec, http.StatusUnprocessableEntity)
			body := rec.Body.String()
			noValue("a refusal", body)
			if !strings.Contains(body, `class="error headers-error"`) || strings.Contains(body, "<script>alert(1)") || strings.Contains(body, "X-<b>") {
				t.Fatalf("the refusal of %q:\n%s", lines, body)
			}
			if s := stored(); s == nil || *s != before {
				t.Fatalf("a refused save changed the headers")
			}
		}
		if rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "headers": {"webhook-signature: v1,x"}}); !shows(rec.Body.String(), "headers.webhook-signature") {
			t.Fatalf("a reserved header's refusal does not name it:\n%s", rec.Body)
		}

		// Without the CSRF token, or in a read-only session, nothing changes.
		expect(t, e.do(t, "POST", path, cookie, url.Values{"do": {"remove"}}), http.StatusForbidden)
		ro := e.enter(t, e.link(t, account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"remove"}}), http.StatusForbidden)
		if s := stored(); s == nil || *s != before {
			t.Fatalf("a refused remove changed the headers")
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"remove"}})
		expect(t, rec, http.StatusOK)
		if stored() != nil || !shows(rec.Body.String(), "The headers were removed") || !shows(rec.Body.String(), "no custom headers") {
			t.Fatalf("a remove left %v:\n%s", stored(), rec.Body)
		}
	})
}
