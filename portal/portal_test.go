package portal_test

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

func TestMain(m *testing.M) { dbtest.Main(m, temporaltest.Stop) }

// frameAncestors lets a page of the portal's own site embed it (another port of 127.0.0.1), so the
// session cookie is the Lax one; TestSessionCookieAcrossSites has the cross-site case.
const frameAncestors = "'self' http://127.0.0.1:9000"

// cspFor is the Content-Security-Policy of every portal response, given its frame-ancestors.
func cspFor(ancestors string) string {
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; " +
		"base-uri 'none'; form-action 'self'; frame-ancestors " + ancestors
}

type env struct {
	db  *model.DB
	srv *portal.Server
	csp string // what every response's Content-Security-Policy must be
}

// envConfig is the portal's Config with what tests give the use cases: a dispatcher, the webhook
// limit.
type envConfig struct {
	portal.Config
	Dispatcher  *dispatch.Dispatcher
	MaxWebhooks int64
}

func newEnv(t testing.TB, db *model.DB, opts ...func(*envConfig)) *env {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := envConfig{Config: portal.Config{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		PublicURL: "http://127.0.0.1:8080", FrameAncestors: frameAncestors, RateLimit: 1000, RateBurst: 1000,
	}, MaxWebhooks: 3}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.Webhooks = webhookstest.New(t, db, box, cfg.Logger, webhookstest.Config{Dispatcher: cfg.Dispatcher, MaxWebhooks: cfg.MaxWebhooks})
	if cfg.Accounts, err = accounts.New(accounts.Config{DB: db}); err != nil {
		t.Fatal(err)
	}
	if cfg.Readiness, err = readiness.New(db, nil, cfg.Logger); err != nil {
		t.Fatal(err)
	}
	srv, err := portal.New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &env{db: db, srv: srv, csp: cspFor(cfg.FrameAncestors)}
}

// forEach runs fn on both databases and both variants.
func forEach(t *testing.T, fn func(t *testing.T, e *env, v model.Variant)) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			for _, v := range model.Variants {
				t.Run(string(v), func(t *testing.T) { fn(t, e, v) })
			}
		})
	}
}

var accountSeq atomic.Int64

func (e *env) account(t *testing.T) *model.Account {
	t.Helper()
	_, account, err := model.CreateAPIKey(t.Context(), e.db, fmt.Sprintf("owner%d@example.com", accountSeq.Add(1)), "test")
	if err != nil {
		t.Fatal(err)
	}
	return account
}

func (e *env) link(t *testing.T, accountID int64, v model.Variant, readOnly bool) string {
	t.Helper()
	token, _, err := model.CreatePortalLink(t.Context(), e.db, model.NewPortalLink{AccountID: accountID, Variant: v, ReadOnly: readOnly, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// do sends one request and checks the headers every portal response carries.
func (e *env) do(t testing.TB, method, path string, cookie *http.Cookie, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return e.serve(t, req)
}

// serve sends a request built by the caller (a chunked or multipart form, say) and checks the
// headers as do does.
func (e *env) serve(t testing.TB, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	method, path := req.Method, req.RequestURI
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	h := rec.Header()
	if got := h.Get("Content-Security-Policy"); got != e.csp {
		t.Errorf("%s %s: CSP = %q, want %q", method, path, got, e.csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s %s: X-Content-Type-Options %q, Referrer-Policy %q", method, path, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
	}
	if page := staticScript.ReplaceAllString(rec.Body.String(), ""); strings.HasPrefix(h.Get("Content-Type"), "text/html") && (strings.Contains(page, "<script") || strings.Contains(page, " style=")) {
		t.Errorf("%s %s: a page with inline script or style:\n%s", method, path, rec.Body)
	}
	return rec
}

func expect(t testing.TB, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d:\n%s", rec.Code, status, rec.Body)
	}
}

// enter opens a link and returns the session cookie.
func (e *env) enter(t testing.TB, token string) *http.Cookie {
	t.Helper()
	rec := e.do(t, "GET", "/portal/enter?token="+token, nil, nil)
	expect(t, rec, http.StatusSeeOther)
	for _, c := range rec.Result().Cookies() {
		if c.Name == portal.CookieName {
			return c
		}
	}
	t.Fatalf("no session cookie: %v", rec.Header())
	return nil
}

// staticScript is the one script tag a page may hold: an embedded file, loaded by src, no body.
var staticScript = regexp.MustCompile(`<script src="/portal/static/[a-z]+\.js" defer></script>`)

var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page, as a browser's form would send it.
func (e *env) csrf(t *testing.T, cookie *http.Cookie) string {
	t.Helper()
	rec := e.do(t, "GET", "/portal/", cookie, nil)
	expect(t, rec, http.StatusOK)
	m := csrfPattern.FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no CSRF field on the endpoints page:\n%s", rec.Body)
	}
	return m[1]
}

func (e *env) webhook(t *testing.T, accountID int64, v model.Variant, rawURL string) *model.Webhook {
	t.Helper()
	now := model.Now()
	w := &model.Webhook{AccountID: accountID, Variant: v, URL: rawURL, EventType: v.EventTypes()[0],
		Status: v.InitialStatus(), Secret: "sealed", CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(t.Context(), e.db, w, 100); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestEnter(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			account := e.account(t)
			token := e.link(t, account.ID, model.VariantB, false)
			rec := e.do(t, "GET", "/portal/enter?token="+token, nil, nil)
			expect(t, rec, http.StatusSeeOther)
			if loc := rec.Header().Get("Location"); loc != "/portal/" {
				t.Fatalf("Location = %q, want /portal/ without the token", loc)
			}
			var cookie *http.Cookie
			for _, c := range rec.Result().Cookies() {
				if c.Name == portal.CookieName {
					cookie = c
				}
			}
			if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/portal/" || cookie.Secure ||
				!strings.HasPrefix(cookie.Value, model.PortalSessionPrefix) || cookie.MaxAge < int(model.PortalSessionTTL/time.Second)-5 {
				t.Fatalf("cookie = %+v: want HttpOnly, SameSite=Lax, Path=/portal/, not Secure on loopback http, 12 h", cookie)
			}
			if got := e.do(t, "GET", "/portal/", cookie, nil); got.Code != http.StatusOK || !strings.Contains(got.Body.String(), "variant B") {
				t.Fatalf("endpoints page with the cookie: %d\n%s", got.Code, got.Body)
			}

			// Reused: 403; forged: 401; expired: 401.
			rec = e.do(t, "GET", "/portal/enter?token="+token, nil, nil)
			expect(t, rec, http.StatusForbidden)
			if !strings.Contains(rec.Body.String(), "already") || len(rec.Result().Cookies()) != 0 {
				t.Fatalf("reused link: %s", rec.Body)
			}
			for _, forged := range []string{"", "wpt_forged", url.QueryEscape(token + "x"), "<script>alert(1)</script>"} {
				rec := e.do(t, "GET", "/portal/enter?token="+forged, nil, nil)
				expect(t, rec, http.StatusUnauthorized)
				if !strings.Contains(rec.Body.String(), "not valid") || len(rec.Result().Cookies()) != 0 || strings.Contains(rec.Body.String(), "<script>alert") {
					t.Fatalf("forged %q: %s", forged, rec.Body)
				}
			}
			expired, link, err := model.CreatePortalLink(t.Context(), e.db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantA, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.db.NewUpdate().Table("portal_links").Set("expires_at = ?", model.Now().Add(-time.Second)).Where("id = ?", link.ID).Exec(t.Context()); err != nil {
				t.Fatal(err)
			}
			expect(t, e.do(t, "GET", "/portal/enter?token="+expired, nil, nil), http.StatusUnauthorized)

			// No session, a forged one, and one revoked: 401, with no data.
			expect(t, e.do(t, "GET", "/portal/", nil, nil), http.StatusUnauthorized)
			expect(t, e.do(t, "GET", "/portal/", &http.Cookie{Name: portal.CookieName, Value: "wps_forged"}, nil), http.StatusUnauthorized)
			if _, err := model.RevokePortalAccess(t.Context(), e.db, account.ID); err != nil {
				t.Fatal(err)
			}
			expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusUnauthorized)
		})
	}
}

// TestEnterSecureCookie: outside loopback http the cookie is Secure.
func TestEnterSecureCookie(t *testing.T) {
	for _, public := range []string{"https://hooks.example.com", "http://hooks.example.com", "https://127.0.0.1:8443"} {
		e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.PublicURL = public })
		cookie := e.enter(t, e.link(t, e.account(t).ID, model.VariantA, false))
		if !cookie.Secure {
			t.Errorf("public URL %s: cookie not Secure", public)
		}
	}
	for _, public := range []string{"http://localhost:8080", "http://[::1]:8080", "http://127.0.0.1:8080"} {
		// No page of another site may embed the portal: the Lax cookie, which over http on
		// loopback cannot be Secure (TestSessionCookieAcrossSites has the other case).
		e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.PublicURL, c.FrameAncestors = public, "'self'" })
		if cookie := e.enter(t, e.link(t, e.account(t).ID, model.VariantA, false)); cookie.Secure {
			t.Errorf("public URL %s: cookie Secure, which a browser drops over http", public)
		}
	}
}

// TestEnterRateLimited: link exchanges are limited per client address, as API requests per key.
func TestEnterRateLimited(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.RateLimit, c.RateBurst = 0.01, 2 })
	expect(t, e.do(t, "GET", "/portal/enter?token=wpt_a", nil, nil), http.StatusUnauthorized)
	expect(t, e.do(t, "GET", "/portal/enter?token=wpt_b", nil, nil), http.StatusUnauthorized)
	rec := e.do(t, "GET", "/portal/enter?token="+e.link(t, e.account(t).ID, model.VariantA, false), nil, nil)
	expect(t, rec, http.StatusTooManyRequests)
	if rec.Header().Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// X-Forwarded-For is the client's to write: it does not buy another bucket.
	req := httptest.NewRequest("GET", "/portal/enter?token=wpt_c", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	rec = httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	expect(t, rec, http.StatusTooManyRequests)
}

// TestEndpoints: the page lists the session's webhooks in the variant's words, and every action
// works as its REST operation does.
func TestEndpoints(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		ctx := t.Context()
		account := e.account(t)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		page := e.do(t, "GET", "/portal/", cookie, nil)
		for _, et := range v.EventTypes() {
			if !strings.Contains(page.Body.String(), `<option value="`+et+`"`) {
				t.Fatalf("the create form lacks event type %s", et)
			}
		}
		if strings.Contains(page.Body.String(), model.EventTest) {
			t.Fatalf("the catalog offers %s", model.EventTest)
		}

		// Create.
		form := url.Values{"csrf": {csrf}, "url": {"https://receiver.example.com/hooks"}, "eventType": {v.EventTypes()[1]}}
		rec := e.do(t, "POST", "/portal/webhooks", cookie, form)
		expect(t, rec, http.StatusCreated)
		hooks, err := model.ListWebhooks(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, model.WebhookFilter{Limit: 10})
		if err != nil || len(hooks) != 1 {
			t.Fatalf("webhooks after create: %v, %v", hooks, err)
		}
		w := hooks[0]
		if w.URL != "https://receiver.example.com/hooks" || w.EventType != v.EventTypes()[1] || w.Status != v.InitialStatus() {
			t.Fatalf("created %+v", w)
		}
		box, _ := secretbox.New(bytes.Repeat([]byte{7}, 32))
		secret, err := box.Open(w.Secret)
		if err != nil || !strings.Contains(html.UnescapeString(rec.Body.String()), secret) {
			t.Fatalf("the created page does not show the secret (%v)", err)
		}
		refs, err := model.UndispatchedDeliveries(ctx, e.db, model.Now().Add(time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		tests := 0
		for _, r := range refs {
			if r.WebhookID == w.ID {
				tests++
			}
		}
		if want := map[model.Variant]int{model.VariantA: 0, model.VariantB: 1}[v]; tests != want {
			t.Fatalf("%d test deliveries for the new webhook, want %d (the variant's TestEvent)", tests, want)
		}
		page = e.do(t, "GET", "/portal/", cookie, nil)
		expect(t, page, http.StatusOK)
		if body := page.Body.String(); !strings.Contains(body, "https://receiver.example.com/hooks") ||
			!strings.Contains(body, `status-`+v.InitialStatus()) || !strings.Contains(body, "never") {
			t.Fatalf("the page does not list the webhook with its status:\n%s", body)
		}

		// Refused creates: the same rules as the API's, named on the page.
		for _, bad := range []url.Values{
			{"csrf": {csrf}, "url": {"https://r.example.com/"}, "eventType": {model.EventTest}},
			{"csrf": {csrf}, "url": {"https://r.example.com/"}, "eventType": {v.Spec().EventTypes[0] + "x"}},
			{"csrf": {csrf}, "url": {"http://r.example.com/"}, "eventType": {v.EventTypes()[0]}},
			{"csrf": {csrf}, "url": {"https://127.0.0.1/"}, "eventType": {v.EventTypes()[0]}},
			{"csrf": {csrf}, "url": {""}, "eventType": {v.EventTypes()[0]}},
		} {
			rec := e.do(t, "POST", "/portal/webhooks", cookie, bad)
			expect(t, rec, http.StatusUnprocessableEntity)
			if !strings.Contains(rec.Body.String(), `class="error"`) {
				t.Fatalf("refused create %v shows no reason:\n%s", bad, rec.Body)
			}
		}

		// Edit the URL.
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		expect(t, e.do(t, "GET", path+"/edit", cookie, nil), http.StatusOK)
		expect(t, e.do(t, "POST", path+"/url", cookie, url.Values{"csrf": {csrf}, "url": {"https://127.0.0.1/x"}}), http.StatusUnprocessableEntity)
		expect(t, e.do(t, "POST", path+"/url", cookie, url.Values{"csrf": {csrf}, "url": {"https://new.example.com/hooks"}}), http.StatusSeeOther)
		got, err := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
		if err != nil || got.URL != "https://new.example.com/hooks" {
			t.Fatalf("after edit: %+v, %v", got, err)
		}

		// Disable and enable.
		expect(t, e.do(t, "POST", path+"/disable", cookie, url.Values{"csrf": {csrf}}), http.StatusSeeOther)
		if got, _ := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID); !got.Disabled() {
			t.Fatal("not disabled")
		}
		if body := e.do(t, "GET", "/portal/", cookie, nil).Body.String(); !strings.Contains(body, "status-disabled") || !strings.Contains(body, path+"/enable") {
			t.Fatalf("a disabled webhook is not shown as such:\n%s", body)
		}
		expect(t, e.do(t, "POST", path+"/enable", cookie, url.Values{"csrf": {csrf}}), http.StatusSeeOther)
		if got, _ := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID); got.Disabled() {
			t.Fatal("not enabled")
		}

		// Delete, after a confirmation page.
		confirm := e.do(t, "GET", path+"/delete", cookie, nil)
		expect(t, confirm, http.StatusOK)
		if !strings.Contains(confirm.Body.String(), `action="`+path+`/delete"`) {
			t.Fatalf("the confirmation page has no delete form:\n%s", confirm.Body)
		}
		expect(t, e.do(t, "POST", path+"/delete", cookie, url.Values{"csrf": {csrf}}), http.StatusSeeOther)
		if _, err := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		expect(t, e.do(t, "GET", path+"/edit", cookie, nil), http.StatusNotFound)

		// The account's limit, as the API's.
		for i := range 3 {
			expect(t, e.do(t, "POST", "/portal/webhooks", cookie, url.Values{"csrf": {csrf}, "url": {fmt.Sprintf("https://r%d.example.com/", i)}, "eventType": {v.EventTypes()[0]}}), http.StatusCreated)
		}
		rec = e.do(t, "POST", "/portal/webhooks", cookie, url.Values{"csrf": {csrf}, "url": {"https://r9.example.com/"}, "eventType": {v.EventTypes()[0]}})
		expect(t, rec, http.StatusUnprocessableEntity)
		if !strings.Contains(rec.Body.String(), "already has 3 endpoints") {
			t.Fatalf("limit page:\n%s", rec.Body)
		}
	})
}

// TestLastDelivery: the page shows when the newest attempt started.
func TestLastDelivery(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			account := e.account(t)
			w := e.webhook(t, account.ID, model.VariantA, "https://r.example.com/")
			res, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: account.ID, Variant: model.VariantA, EventType: w.EventType, Data: `{}`})
			if err != nil || len(res.Deliveries) != 1 {
				t.Fatalf("publish: %v", err)
			}
			at := time.Date(2026, 11, 20, 8, 30, 15, 0, time.UTC)
			for i, started := range []time.Time{at.Add(-time.Hour), at} {
				a := &model.Attempt{DeliveryID: res.Deliveries[0].ID, Attempt: i + 1, URL: w.URL, StartedAt: started, LatencyMS: 5}
				if _, err := e.db.NewInsert().Model(a).Exec(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			cookie := e.enter(t, e.link(t, account.ID, model.VariantA, false))
			if body := e.do(t, "GET", "/portal/", cookie, nil).Body.String(); !strings.Contains(body, "2026-11-20 08:30:15 UTC") {
				t.Fatalf("the last delivery time is not shown:\n%s", body)
			}
		})
	}
}

// TestCSRF: a change without the session's CSRF token is 403 and changes nothing.
func TestCSRF(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w := e.webhook(t, account.ID, v, "https://r.example.com/")
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		other := e.enter(t, e.link(t, account.ID, v, false))
		otherCSRF := e.csrf(t, other)
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		for _, action := range []struct {
			path string
			form url.Values
		}{
			{"/portal/webhooks", url.Values{"url": {"https://x.example.com/"}, "eventType": {v.EventTypes()[0]}}},
			{path + "/url", url.Values{"url": {"https://x.example.com/"}}},
			{path + "/disable", url.Values{}},
			{path + "/enable", url.Values{}},
			{path + "/delete", url.Values{}},
		} {
			for _, csrf := range []string{"", "wrong", otherCSRF} {
				form := url.Values{}
				for k, vs := range action.form {
					form[k] = vs
				}
				if csrf != "" {
					form.Set("csrf", csrf)
				}
				expect(t, e.do(t, "POST", action.path, cookie, form), http.StatusForbidden)
			}
			// The token in the query string does not count: it belongs in the form.
			expect(t, e.do(t, "POST", action.path+"?csrf="+url.QueryEscape(e.csrf(t, cookie)), cookie, url.Values{}), http.StatusForbidden)
		}
		got, err := model.GetWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
		if err != nil || got.URL != w.URL || got.Disabled() {
			t.Fatalf("a refused change changed the webhook: %+v, %v", got, err)
		}
		hooks, _ := model.ListWebhooks(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, model.WebhookFilter{Limit: 10})
		if len(hooks) != 1 {
			t.Fatalf("%d webhooks after refused creates", len(hooks))
		}
	})
}

// TestReadOnly: a read-only session sees everything, shows no action, and every change is 403.
func TestReadOnly(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w := e.webhook(t, account.ID, v, "https://r.example.com/")
		cookie := e.enter(t, e.link(t, account.ID, v, true))
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		for _, page := range []string{"/portal/", path + "/edit", path + "/delete"} {
			rec := e.do(t, "GET", page, cookie, nil)
			expect(t, rec, http.StatusOK)
			body := rec.Body.String()
			if !strings.Contains(body, "r.example.com") || !strings.Contains(body, "read-only") {
				t.Fatalf("%s does not show the webhook in a read-only session:\n%s", page, body)
			}
			// Signing out is the one form a read-only session has: it changes nothing of the account's.
			body = logoutForm.ReplaceAllString(body, "")
			if strings.Contains(body, "<form") || strings.Contains(body, "<button") || strings.Contains(body, "/edit\"") {
				t.Fatalf("%s shows actions in a read-only session:\n%s", page, body)
			}
		}
		csrf := csrfOf(cookie)
		for _, action := range []string{"/portal/webhooks", path + "/url", path + "/disable", path + "/enable", path + "/delete"} {
			rec := e.do(t, "POST", action, cookie, url.Values{"csrf": {csrf}, "url": {"https://x.example.com/"}, "eventType": {v.EventTypes()[0]}})
			expect(t, rec, http.StatusForbidden)
			if !strings.Contains(rec.Body.String(), "read-only") {
				t.Fatalf("POST %s: %s", action, rec.Body)
			}
		}
		got, err := model.GetWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
		if err != nil || got.URL != w.URL || got.Disabled() {
			t.Fatalf("a read-only session changed the webhook: %+v, %v", got, err)
		}
	})
}

// logoutForm is the header's sign-out form, which every session's pages carry.
var logoutForm = regexp.MustCompile(`<form class="logout" method="post" action="/portal/logout"><input type="hidden" name="csrf" value="[^"]+"><button type="submit">Sign out</button></form>`)

// csrfOf computes a session's CSRF token as the portal does, for a read-only session whose pages
// carry no form to read it from.
func csrfOf(cookie *http.Cookie) string { return portal.CSRFToken(cookie.Value) }

// TestTenancy: another account's webhook, or the account's own of the other variant, is 404 on
// every page and action, as in the REST API, and stays as it was.
func TestTenancy(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account, stranger := e.account(t), e.account(t)
		other := model.VariantA
		if v == model.VariantA {
			other = model.VariantB
		}
		theirs := e.webhook(t, stranger.ID, v, "https://theirs.example.com/")
		otherVariant := e.webhook(t, account.ID, other, "https://other-variant.example.com/")
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		page := e.do(t, "GET", "/portal/", cookie, nil).Body.String()
		if strings.Contains(page, "theirs.example.com") || strings.Contains(page, "other-variant.example.com") {
			t.Fatalf("the page lists webhooks outside the session's scope:\n%s", page)
		}
		for _, w := range []*model.Webhook{theirs, otherVariant} {
			path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
			for _, get := range []string{path + "/edit", path + "/delete"} {
				expect(t, e.do(t, "GET", get, cookie, nil), http.StatusNotFound)
			}
			for _, post := range []string{path + "/url", path + "/disable", path + "/enable", path + "/delete"} {
				expect(t, e.do(t, "POST", post, cookie, url.Values{"csrf": {csrf}, "url": {"https://x.example.com/"}}), http.StatusNotFound)
			}
			got, err := model.FindWebhook(t.Context(), e.db, w.ID)
			if err != nil || got.URL != w.URL || got.Disabled() {
				t.Fatalf("webhook %d changed from another session: %+v, %v", w.ID, got, err)
			}
		}
		for _, bad := range []string{"0", "-1", "01", "+1", "x", "99999999999999999999"} {
			expect(t, e.do(t, "GET", "/portal/webhooks/"+bad+"/edit", cookie, nil), http.StatusNotFound)
		}
	})
}

// TestEscaping: a URL holding markup shows as text on every page.
func TestEscaping(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		evil := `https://example.com/a?q=<script>alert(1)</script>&r="><img src=x onerror=alert(2)>`
		rec := e.do(t, "POST", "/portal/webhooks", cookie, url.Values{"csrf": {csrf}, "url": {evil}, "eventType": {v.EventTypes()[0]}})
		var w *model.Webhook
		if rec.Code == http.StatusCreated {
			hooks, _ := model.ListWebhooks(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, model.WebhookFilter{Limit: 10})
			w = &hooks[0]
		} else {
			// The URL rule refused it: store it as an older rule might have let it in.
			expect(t, rec, http.StatusUnprocessableEntity)
			w = e.webhook(t, account.ID, v, evil)
		}
		if w.URL != evil {
			t.Fatalf("stored URL %q", w.URL)
		}
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		pages := []*httptest.ResponseRecorder{
			rec,
			e.do(t, "GET", "/portal/", cookie, nil),
			e.do(t, "GET", path+"/edit", cookie, nil),
			e.do(t, "GET", path+"/delete", cookie, nil),
			e.do(t, "POST", "/portal/webhooks", cookie, url.Values{"csrf": {csrf}, "url": {"javascript:" + evil}, "eventType": {v.EventTypes()[0]}}),
		}
		for i, page := range pages {
			body := page.Body.String()
			if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
				t.Fatalf("page %d holds the markup unescaped:\n%s", i, body)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Fatalf("page %d does not show the URL as text:\n%s", i, body)
			}
		}
	})
}

// TestStaticAndUnknown: the CSS is served from the binary; an unknown page is 404 as a page.
func TestStaticAndUnknown(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	rec := e.do(t, "GET", "/portal/static/portal.css", nil, nil)
	expect(t, rec, http.StatusOK)
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/css") || !strings.Contains(rec.Body.String(), "body") {
		t.Fatalf("portal.css: %q %s", rec.Header().Get("Content-Type"), rec.Body)
	}
	rec = e.do(t, "GET", "/portal/nope", nil, nil)
	expect(t, rec, http.StatusNotFound)
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("404 is %q", rec.Header().Get("Content-Type"))
	}
}

// TestStaticNoListing (issue 27): /portal/static/ serves its files by name and never lists a
// directory: the folder itself, and any path ending in '/', is the portal's 404 page, also without
// a session, and so is a directory named without its '/'.
func TestStaticNoListing(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	for _, name := range []string{"portal.css", "events.css", "follow.js"} {
		rec := e.do(t, "GET", "/portal/static/"+name, nil, nil)
		if body, _ := os.ReadFile("static/" + name); rec.Code != http.StatusOK || rec.Body.String() != string(body) {
			t.Errorf("GET /portal/static/%s: %d, %d bytes, want 200 and the file's %d", name, rec.Code, rec.Body.Len(), len(body))
		}
	}
	for _, path := range []string{"/portal/static/", "/portal/static//", "/portal/static/./", "/portal/static/%2e/",
		"/portal/static/nope/", "/portal/static/portal.css/", "/portal/static/portal.css%2F", "/portal/static/index.html"} {
		rec := e.do(t, "GET", path, nil, nil)
		if rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
			strings.Contains(rec.Body.String(), "portal.css</a>") || !strings.Contains(rec.Body.String(), "Not found") {
			t.Errorf("GET %s: %d %q, want the 404 page:\n%s", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}

	// The embedded folder has no subdirectory today; one added later is no more listed.
	files := fstest.MapFS{"a.css": {Data: []byte("a{}")}, "sub/b.css": {Data: []byte("b{}")}, "sub/deeper/c.css": {Data: []byte("c{}")}}
	ech := echo.New()
	ech.GET(portal.Prefix+"static/*", portal.Assets(files))
	for path, want := range map[string]int{
		"a.css": 200, "sub/b.css": 200, "sub/deeper/c.css": 200,
		"": 404, "sub/": 404, "sub": 404, "sub/deeper/": 404, "sub/deeper": 404, "sub/./": 404, "sub//": 404,
	} {
		rec := httptest.NewRecorder()
		ech.ServeHTTP(rec, httptest.NewRequest("GET", portal.Prefix+"static/"+path, nil))
		if rec.Code != want || strings.Contains(rec.Body.String(), "b.css") && path != "sub/b.css" {
			t.Errorf("GET static/%s: %d, want %d:\n%s", path, rec.Code, want, rec.Body)
		}
	}
}
