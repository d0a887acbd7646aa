package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func portalPath(v variantCase) string {
	return strings.TrimSuffix(v.collection, "/webhooks") + "/portal-sessions"
}

func withPublicURL(u string) serverOption { return func(c *envConfig) { c.PublicURL = u } }

// TestPortalSessionLink: the link points at the public URL, opens a session of the caller's account
// and variant, honours ttl and readOnly, records the caller's key, and opens once.
func TestPortalSessionLink(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), withPublicURL("https://hooks.example.com/"))
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					key := newKey(t, e.db)
					account, keyID, err := model.Authenticate(t.Context(), e.db, key)
					if err != nil {
						t.Fatal(err)
					}
					for _, tc := range []struct {
						body     string
						ttl      time.Duration
						readOnly bool
					}{
						{"", accounts.DefaultPortalLinkTTL, false},
						{`{}`, accounts.DefaultPortalLinkTTL, false},
						{`{"ttl":null}`, accounts.DefaultPortalLinkTTL, false},
						{`{"ttl":600,"readOnly":true}`, 10 * time.Minute, true},
						{`{"ttl":86400}`, 24 * time.Hour, false},
					} {
						before := model.Now()
						r := e.do(t, "POST", portalPath(v), v.auth(key), tc.body)
						r.expect(t, http.StatusCreated, "")
						v.okEnvelope(t, r)
						d := r.data(t)
						link, ok := d["url"].(string)
						if !ok || !strings.HasPrefix(link, "https://hooks.example.com/portal/enter?token=wpt_") {
							t.Fatalf("url = %v", d["url"])
						}
						expires, err := time.Parse(time.RFC3339Nano, d["expiresAt"].(string))
						if err != nil {
							t.Fatal(err)
						}
						if got := expires.Sub(before); got < tc.ttl-time.Second || got > tc.ttl+5*time.Second {
							t.Fatalf("body %s: expires in %s, want %s", tc.body, got, tc.ttl)
						}
						u, _ := url.Parse(link)
						_, session, err := model.ExchangePortalToken(t.Context(), e.db, u.Query().Get("token"))
						if err != nil {
							t.Fatal(err)
						}
						if session.AccountID != account.ID || string(session.Variant) != v.name || session.ReadOnly != tc.readOnly {
							t.Fatalf("session = %+v, want account %d variant %s readOnly %v", session, account.ID, v.name, tc.readOnly)
						}
						var recorded int64
						if err := e.db.NewSelect().Table("portal_links").Column("api_key_id").Where("id = ?", session.LinkID).Scan(t.Context(), &recorded); err != nil || recorded != keyID.ID {
							t.Fatalf("the link records key %d, %v; want the caller's, %d", recorded, err, keyID.ID)
						}
					}
				})
			}
		})
	}
}

// TestPortalSessionRefusals: the body is read as strictly as every other, ttl is bounded, and the
// variant's credential is required.
func TestPortalSessionRefusals(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		for _, tc := range []struct {
			body   string
			status int
			field  string
		}{
			{`{"ttl":`, http.StatusBadRequest, ""},
			{`[]`, http.StatusBadRequest, ""},
			{`{"ttl":"1h"}`, http.StatusBadRequest, "ttl"},
			{`{"ttl":1.5}`, http.StatusBadRequest, "ttl"},
			{`{"readOnly":"yes"}`, http.StatusBadRequest, "readOnly"},
			{`{"readonly":true}`, http.StatusBadRequest, "readonly"},
			{`{"expires":60}`, http.StatusBadRequest, "expires"},
			{`{"ttl":0}`, http.StatusUnprocessableEntity, "ttl"},
			{`{"ttl":-5}`, http.StatusUnprocessableEntity, "ttl"},
			{`{"ttl":86401}`, http.StatusUnprocessableEntity, "ttl"},
			// Seconds whose nanoseconds wrap an int64 to 0.29 s: out of range all the same.
			{`{"ttl":18446744074}`, http.StatusUnprocessableEntity, "ttl"},
		} {
			r := e.do(t, "POST", portalPath(v), v.auth(key), tc.body)
			r.expectError(t, v, tc.status, tc.field)
		}
		e.do(t, "POST", portalPath(v), nil, "").expectError(t, v, http.StatusUnauthorized, "")
		e.do(t, "POST", portalPath(v), v.wrongAuth(key), "").expectError(t, v, http.StatusUnauthorized, "")
		e.do(t, "POST", portalPath(v), v.auth("whk_notakeyatallnotakeyatall"), "").expectError(t, v, http.StatusUnauthorized, "")
	})
}

func TestPortalSessionPortalOff(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.PortalOff = true })
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := e.do(t, "POST", portalPath(v), v.auth(newKey(t, e.db)), "")
			r.expectError(t, v, http.StatusNotFound, "")
		})
	}
}
