package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestAuthForm (issue 31, part 2): the endpoint page's authentication form sets Basic, replaces it
// with OAuth2, refuses a token URL the address rules refuse and a missing field naming it (nothing
// saved, markup escaped), and removes it; no page ever shows the password or the client secret.
// Without the CSRF token, or in a read-only session, nothing changes.
func TestAuthForm(t *testing.T) {
	const password, clientSecret = "pw-0123456789-secret", "cs-9876543210-secret"
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		account, w, cookie, csrf, page := f.account, f.webhook, f.cookie, f.csrf, f.page
		path := page + "/auth"
		stored := func() *string { return f.stored().Auth }
		noSecret := func(what, body string) {
			t.Helper()
			for _, s := range []string{password, clientSecret} {
				if strings.Contains(body, s) {
					t.Fatalf("%s shows a secret:\n%s", what, body)
				}
			}
		}

		rec := e.do(t, "GET", page, cookie, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), "no authentication") {
			t.Fatalf("the page of an endpoint without authentication:\n%s", rec.Body)
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"basic"}, "username": {"hook-user"}, "password": {password}})
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		noSecret("the answer to a save", body)
		if s := stored(); s == nil || strings.Contains(*s, password) || !shows(body, "hook-user") || !shows(body, "••••••••") ||
			!shows(body, "The authentication was saved") {
			t.Fatalf("saved auth %v; the page:\n%s", s, body)
		}
		rec = e.do(t, "GET", page, cookie, nil)
		noSecret("the page", rec.Body.String())

		// Replace with OAuth2.
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"oauth2"}, "tokenUrl": {"https://idp.example.com/token"},
			"clientId": {"hook-client"}, "clientSecret": {clientSecret}, "scopes": {"a  b"}, "audience": {"https://api.example.com"}})
		expect(t, rec, http.StatusOK)
		body = rec.Body.String()
		noSecret("the answer to a replace", body)
		if shows(body, "hook-user") || !shows(body, "https://idp.example.com/token") || !shows(body, "hook-client") || !shows(body, "a b") {
			t.Fatalf("a replace's page:\n%s", body)
		}
		before := *stored()

		// Refusals: a loopback token URL, a missing secret, markup in a field; escaped, nothing saved.
		for _, c := range []struct {
			form  url.Values
			field string
		}{
			{url.Values{"do": {"oauth2"}, "tokenUrl": {"https://127.0.0.1/token"}, "clientId": {"c"}, "clientSecret": {clientSecret}}, "auth.tokenUrl"},
			{url.Values{"do": {"oauth2"}, "tokenUrl": {"http://idp.example.com/token"}, "clientId": {"c"}, "clientSecret": {clientSecret}}, "auth.tokenUrl"},
			{url.Values{"do": {"basic"}, "username": {"u"}}, "auth.password"},
			{url.Values{"do": {"basic"}, "username": {"<script>alert(1)</script>:"}, "password": {password}}, "auth.username"},
		} {
			c.form.Set("csrf", csrf)
			rec = e.do(t, "POST", path, cookie, c.form)
			expect(t, rec, http.StatusUnprocessableEntity)
			body := rec.Body.String()
			noSecret("a refusal", body)
			if !strings.Contains(body, `class="error auth-error"`) || !shows(body, c.field) || strings.Contains(body, "<script>alert(1)") {
				t.Fatalf("the refusal of %v:\n%s", c.form, body)
			}
			if s := stored(); s == nil || *s != before {
				t.Fatalf("a refused save changed the authentication")
			}
		}

		// Without the CSRF token, or in a read-only session, nothing changes.
		expect(t, e.do(t, "POST", path, cookie, url.Values{"do": {"remove"}}), http.StatusForbidden)
		ro := e.enter(t, e.link(t, account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"remove"}}), http.StatusForbidden)
		if s := stored(); s == nil || *s != before {
			t.Fatalf("a refused remove changed the authentication")
		}
		rec = e.do(t, "GET", page, ro, nil)
		if strings.Contains(rec.Body.String(), `action="/portal/webhooks/`+fmt.Sprint(w.ID)+`/auth"`) {
			t.Fatalf("a read-only page offers the authentication form")
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"remove"}})
		expect(t, rec, http.StatusOK)
		if stored() != nil || !shows(rec.Body.String(), "The authentication was removed") || !shows(rec.Body.String(), "no authentication") {
			t.Fatalf("a remove left %v:\n%s", stored(), rec.Body)
		}
	})
}
