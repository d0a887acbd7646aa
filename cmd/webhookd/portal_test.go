package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
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
