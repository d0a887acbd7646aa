package portal_test

import (
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
)

// TestCrossSiteAncestor: which WEBHOOKD_PORTAL_FRAME_ANCESTORS let a page of another site embed
// the portal, by the browser's schemeful site (scheme and registrable domain).
func TestCrossSiteAncestor(t *testing.T) {
	for _, c := range []struct {
		public, ancestors string
		want              bool
	}{
		{"https://hooks.example.com", "'self'", false},
		{"https://hooks.example.com", "'none'", false},
		{"https://hooks.example.com", "'self' https://app.example.com", false},
		{"https://hooks.example.com", "https://app.example.com:8443/path", false},
		{"https://hooks.example.com", "https://*.example.com", false},
		{"https://hooks.example.co.uk", "https://app.example.co.uk", false},
		{"https://hooks.example.com", "http://app.example.com", true}, // another scheme
		{"https://hooks.example.com", "'self' https://app.other.com", true},
		{"https://a.github.io", "https://b.github.io", true}, // a public suffix: two sites
		{"https://hooks.example.com", "https:", true},
		{"https://hooks.example.com", "*", true},
		{"https://hooks.example.com", "'unsafe-whatever'", true},
		{"http://127.0.0.1:8080", "http://127.0.0.1:9000", false}, // another origin, the same site
		{"http://127.0.0.1:8080", "http://localhost:9000", true},
		{"http://[::1]:8080", "http://[::1]:9000", false},
	} {
		if got := portal.CrossSiteAncestor(c.public, c.ancestors); got != c.want {
			t.Errorf("public %s, frame-ancestors %s: cross-site %v, want %v", c.public, c.ancestors, got, c.want)
		}
	}
}

// TestSessionCookieAcrossSites: with a page of another site allowed to embed the portal, the
// session cookie is SameSite=None, Secure and Partitioned, since a browser sends a Lax cookie in no
// cross-site frame; without one it stays Lax. Signing out clears it with the same attributes.
func TestSessionCookieAcrossSites(t *testing.T) {
	for _, c := range []struct {
		public, ancestors string
		sameSite          http.SameSite
		secure, partition bool
	}{
		{"https://hooks.example.com", "'self' https://app.example.com", http.SameSiteLaxMode, true, false},
		{"https://hooks.example.com", "'self' https://app.other.com", http.SameSiteNoneMode, true, true},
		{"http://127.0.0.1:8080", "'self' http://localhost:9000", http.SameSiteNoneMode, true, true},
		{"http://127.0.0.1:8080", "'self' http://127.0.0.1:9000", http.SameSiteLaxMode, false, false},
	} {
		e := newEnv(t, dbtest.SQLite(t), func(cfg *envConfig) { cfg.PublicURL, cfg.FrameAncestors = c.public, c.ancestors })
		rec := e.do(t, "GET", "/portal/enter?token="+e.link(t, e.account(t).ID, model.VariantB, false), nil, nil)
		expect(t, rec, http.StatusSeeOther)
		var got *http.Cookie
		for _, ck := range rec.Result().Cookies() {
			if ck.Name == portal.CookieName {
				got = ck
			}
		}
		if got == nil || got.SameSite != c.sameSite || got.Secure != c.secure || got.Partitioned != c.partition || !got.HttpOnly {
			t.Errorf("public %s, frame-ancestors %s: cookie %q, want SameSite %v, Secure %v, Partitioned %v, HttpOnly",
				c.public, c.ancestors, rec.Header().Get("Set-Cookie"), c.sameSite, c.secure, c.partition)
		}
	}
}
