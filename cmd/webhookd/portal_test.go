package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/portal"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// TestPortalLinkCommand: the URL alone on the last line, scoped as asked; --revoke-all ends the
// sessions it opened; bad arguments are refused before anything is touched.
func TestPortalLinkCommand(t *testing.T) {
	ctx := context.Background()
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db"), PublicURL: "https://hooks.example.com", Portal: true}
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := portalLinkCommand(ctx, cfg, args, &out, io.Discard)
		return out.String(), err
	}
	if _, err := cmd("--owner-email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no account") {
		t.Fatalf("unknown owner: %v", err)
	}
	if err := apikeyCommand(ctx, cfg, []string{"create", "--owner-email", "ops@example.com"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exchange := func(link string) (string, *model.PortalSession) {
		t.Helper()
		u, err := url.Parse(link)
		if err != nil || u.Scheme != "https" || u.Host != "hooks.example.com" || u.Path != "/portal/enter" {
			t.Fatalf("last line %q is not a portal link", link)
		}
		sid, s, err := model.ExchangePortalToken(ctx, db, u.Query().Get("token"))
		if err != nil {
			t.Fatal(err)
		}
		return sid, s
	}
	for _, tc := range []struct {
		args     []string
		variant  model.Variant
		readOnly bool
	}{
		{nil, model.VariantB, false},
		{[]string{"--variant", "a", "--read-only"}, model.VariantA, true},
		{[]string{"--variant", "B", "--ttl", "24h"}, model.VariantB, false},
	} {
		out, err := cmd(append([]string{"--owner-email", "ops@example.com"}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, s := exchange(lastLine(out))
		if s.Variant != tc.variant || s.ReadOnly != tc.readOnly {
			t.Fatalf("%v: session %+v", tc.args, s)
		}
	}
	out, err := cmd("--owner-email", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := exchange(lastLine(out))
	if _, err := cmd("--revoke-all", "--owner-email", "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := model.PortalSessionByID(ctx, db, sid); !errors.Is(err, model.ErrPortalSessionEnded) {
		t.Fatalf("session after --revoke-all: %v", err)
	}
	for _, args := range [][]string{
		{},
		{"--variant", "C", "--owner-email", "ops@example.com"},
		{"--ttl", "25h", "--owner-email", "ops@example.com"},
		{"--ttl", "0s", "--owner-email", "ops@example.com"},
		{"--owner-email", "ops@example.com", "extra"},
	} {
		if _, err := cmd(args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	cfg.Portal = false
	if _, err := cmd("--owner-email", "ops@example.com"); err == nil {
		t.Error("a link made with the portal off")
	}
}

// TestPortalFrameAncestorsChecked: the value goes into a header, so what would end the directive
// or the header is refused.
func TestPortalFrameAncestorsChecked(t *testing.T) {
	for _, bad := range []string{"'self'; script-src *", "'self', https://a.example.com", "'self'\r\nX-Evil: 1", "   "} {
		if _, err := loadConfig([]string{"WEBHOOKD_PORTAL_FRAME_ANCESTORS=" + bad}); err == nil || !strings.Contains(err.Error(), "WEBHOOKD_PORTAL_FRAME_ANCESTORS") {
			t.Errorf("%q: %v, want a refusal naming the variable", bad, err)
		}
	}
	cfg, err := loadConfig([]string{"WEBHOOKD_PORTAL_FRAME_ANCESTORS='self' https://app.example.com", "WEBHOOKD_PORTAL=false"})
	if err != nil || cfg.PortalFrameAncestors != "'self' https://app.example.com" || cfg.Portal {
		t.Fatalf("cfg = %q %v, %v", cfg.PortalFrameAncestors, cfg.Portal, err)
	}
	if cfg, _ := loadConfig(nil); !cfg.Portal || cfg.PortalFrameAncestors != "'self'" {
		t.Fatalf("defaults: %v %q", cfg.Portal, cfg.PortalFrameAncestors)
	}
}

// TestPortalMount: the portal answers under /portal/ beside the API; with WEBHOOKD_PORTAL=false
// /portal/ is the API's, which answers 404, as POST <prefix>/portal-sessions does.
func TestPortalMount(t *testing.T) {
	ctx := context.Background()
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db")}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key, _, err := model.CreateAPIKey(ctx, db, "ops@example.com", "test")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	for _, on := range []bool{true, false} {
		uses := testUseCases(t, db)
		access, ready := testAccess(t, Config{PublicURL: "http://127.0.0.1:8080", Portal: on}, db)
		srv, err := api.New(api.Config{Webhooks: uses, Sources: testSources(t, db, uses), Accounts: access, Readiness: ready, Logger: logger, RateLimit: 100, RateBurst: 100, PublicURL: "http://127.0.0.1:8080"})
		if err != nil {
			t.Fatal(err)
		}
		var handler http.Handler = srv
		if on {
			p, err := portal.New(portal.Config{Webhooks: uses, Accounts: access, Readiness: ready, Logger: logger, PublicURL: "http://127.0.0.1:8080", RateLimit: 20, RateBurst: 40, FrameAncestors: "'self'"})
			if err != nil {
				t.Fatal(err)
			}
			handler = withPortal(srv, p)
		}
		do := func(method, path string, auth bool) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, path, nil)
			if auth {
				req.Header.Set("x-api-key", key)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			return rec
		}
		link := do("POST", "/api/svc/v2/portal-sessions", true)
		page := do("GET", "/portal/", false)
		enter := do("GET", "/portal/enter?token=wpt_x", false)
		bare := do("GET", "/portal", false)
		if on {
			if bare.Code != http.StatusMovedPermanently || bare.Header().Get("Location") != "/portal/" {
				t.Fatalf("GET /portal: %d %q, want a redirect to /portal/", bare.Code, bare.Header().Get("Location"))
			}
			if link.Code != http.StatusCreated || page.Code != http.StatusUnauthorized || enter.Code != http.StatusUnauthorized ||
				page.Header().Get("Content-Security-Policy") == "" {
				t.Fatalf("portal on: link %d, /portal/ %d, enter %d", link.Code, page.Code, enter.Code)
			}
		} else if link.Code != http.StatusNotFound || page.Code != http.StatusNotFound || enter.Code != http.StatusNotFound || bare.Code != http.StatusNotFound {
			t.Fatalf("portal off: link %d, /portal/ %d, enter %d; want 404", link.Code, page.Code, enter.Code)
		}
		if rec := do("GET", "/api/svc/v2/webhooks", true); rec.Code != http.StatusOK {
			t.Fatalf("the API beside the portal: %d", rec.Code)
		}
	}
}

// TestAPIKeyRevokeEndsPortalAccess (issue 27): a key that leaked may already have made portal
// links and opened sessions with them. Revoking it refuses its unused links (401) and ends the
// sessions its links opened (401 on the next request, as an expired session), and says so; the
// account's other key and an operator's link (portal-link, no key) keep theirs.
func TestAPIKeyRevokeEndsPortalAccess(t *testing.T) {
	ctx := context.Background()
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db"), PublicURL: "http://127.0.0.1:8080", Portal: true}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leaked, _, err := model.CreateAPIKey(ctx, db, "ops@example.com", "leaked")
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := model.CreateAPIKey(ctx, db, "ops@example.com", "kept")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	uses := testUseCases(t, db)
	access, ready := testAccess(t, cfg, db)
	srv, err := api.New(api.Config{Webhooks: uses, Sources: testSources(t, db, uses), Accounts: access, Readiness: ready, Logger: logger, RateLimit: 100, RateBurst: 100, PublicURL: cfg.PublicURL})
	if err != nil {
		t.Fatal(err)
	}
	p, err := portal.New(portal.Config{Webhooks: uses, Accounts: access, Readiness: ready, Logger: logger, PublicURL: cfg.PublicURL, RateLimit: 100, RateBurst: 100, FrameAncestors: "'self'"})
	if err != nil {
		t.Fatal(err)
	}
	handler := withPortal(srv, p)
	do := func(method, path, key string, cookie *http.Cookie, form url.Values) *httptest.ResponseRecorder {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec
	}
	// linkPath asks the API for a link with key, as an integrator's server does, and returns the
	// path that opens it.
	linkPath := func(key string) string {
		t.Helper()
		rec := do("POST", "/api/svc/v2/portal-sessions", key, nil, nil)
		if rec.Code != http.StatusCreated {
			t.Fatalf("POST portal-sessions: %d %s", rec.Code, rec.Body)
		}
		m := regexp.MustCompile(`"url":"([^"]+)"`).FindStringSubmatch(rec.Body.String())
		if m == nil {
			t.Fatalf("no url in %s", rec.Body)
		}
		u, err := url.Parse(m[1])
		if err != nil {
			t.Fatal(err)
		}
		return u.RequestURI()
	}
	// open opens a link and returns the session cookie, after checking the session shows a page
	// and carries a CSRF token for its forms.
	open := func(path string) (*http.Cookie, string) {
		t.Helper()
		rec := do("GET", path, "", nil, nil)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("open %s: %d, want 303", path, rec.Code)
		}
		var cookie *http.Cookie
		for _, c := range rec.Result().Cookies() {
			if c.Name == portal.CookieName {
				cookie = c
			}
		}
		page := do("GET", "/portal/", "", cookie, nil)
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.Body.String())
		if page.Code != http.StatusOK || m == nil {
			t.Fatalf("the session's page: %d\n%s", page.Code, page.Body)
		}
		return cookie, m[1]
	}
	opened, csrf := open(linkPath(leaked))
	unused := linkPath(leaked)
	otherKeys, _ := open(linkPath(kept))
	// operatorLink makes a link with webhookd portal-link, without a key.
	operatorLink := func() string {
		t.Helper()
		var out bytes.Buffer
		if err := portalLinkCommand(ctx, cfg, []string{"--owner-email", "ops@example.com"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(lastLine(out.String()))
		if err != nil {
			t.Fatal(err)
		}
		return u.RequestURI()
	}
	operators, _ := open(operatorLink())
	operatorUnused := operatorLink()

	keys, err := model.ListAPIKeys(ctx, db, "ops@example.com")
	if err != nil || keys[0].Name != "leaked" {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	var out bytes.Buffer
	if err := apikeyCommand(ctx, cfg, []string{"revoke", strconv.FormatInt(keys[0].ID, 10)}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := "refused 1 unused portal links and ended 1 portal sessions made with it"; !strings.Contains(out.String(), want) {
		t.Errorf("apikey revoke printed %q, want it to say %q", out.String(), want)
	}

	if rec := do("GET", unused, "", nil, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("a link of the revoked key, opened after the revocation: %d, want 401", rec.Code)
	}
	if rec := do("GET", "/portal/", "", opened, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("a session the revoked key's link opened, after the revocation: %d, want 401", rec.Code)
	}
	form := url.Values{"csrf": {csrf}, "url": {"https://attacker.example.net/hook"}, "eventType": {"lead.captured"}}
	if rec := do("POST", "/portal/webhooks", "", opened, form); rec.Code != http.StatusUnauthorized {
		t.Errorf("a webhook created in that session after the revocation: %d, want 401", rec.Code)
	}
	for name, cookie := range map[string]*http.Cookie{"the other key's": otherKeys, "an operator's": operators} {
		if rec := do("GET", "/portal/", "", cookie, nil); rec.Code != http.StatusOK {
			t.Errorf("%s session after the revocation: %d, want 200", name, rec.Code)
		}
	}
	open(operatorUnused)
	if rec := do("POST", "/api/svc/v2/portal-sessions", leaked, nil, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("the revoked key asks for a link: %d, want 401", rec.Code)
	}
}

// testUseCases are the use cases of serve's defaults over db, without Temporal.
// testAccess is serve's accounts and readiness on db, with cfg's public URL and portal switch, and
// no Temporal.
func testAccess(t *testing.T, cfg Config, db *model.DB) (*accounts.Service, *readiness.Checker) {
	t.Helper()
	access, err := newAccounts(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	ready, err := readiness.New(db, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return access, ready
}

func testUseCases(t *testing.T, db *model.DB) *webhooks.Service {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return webhookstest.New(t, db, box, slog.New(slog.DiscardHandler), webhookstest.Config{MaxWebhooks: 100})
}
