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
	"strings"
	"testing"

	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/portal"
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
		srv, err := api.New(api.Config{DB: db, Logger: logger, RateLimit: 100, RateBurst: 100, PublicURL: "http://127.0.0.1:8080", PortalOff: !on})
		if err != nil {
			t.Fatal(err)
		}
		var handler http.Handler = srv
		if on {
			p, err := portal.New(portal.Config{DB: db, Logger: logger, PublicURL: "http://127.0.0.1:8080"})
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
