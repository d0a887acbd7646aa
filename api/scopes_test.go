package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
)

// Who besides a manage key may call each route of the variants, by method and path after the
// variant's prefix (docs/api.md, "Scoped API keys"). A route the server registers that is not
// listed here fails TestScopesOverEveryRoute: a new route must say who may call it.
const (
	manageOnly = ""
	readers    = "read"
	publishers = "publish"
	eventLog   = "read publish"
)

var routeScopes = map[string]string{
	"GET /webhooks":                                   readers,
	"POST /webhooks":                                  manageOnly,
	"POST /webhooks/filter-test":                      manageOnly,
	"GET /webhooks/:id":                               readers,
	"PUT /webhooks/:id":                               manageOnly,
	"PATCH /webhooks/:id":                             manageOnly,
	"DELETE /webhooks/:id":                            manageOnly,
	"GET /webhooks/:id/health":                        readers,
	"GET /webhooks/:id/secret":                        manageOnly,
	"POST /webhooks/:id/secret/rotate":                manageOnly,
	"POST /webhooks/:id/retry":                        manageOnly,
	"POST /webhooks/:id/disable":                      manageOnly,
	"POST /webhooks/:id/enable":                       manageOnly,
	"GET /webhooks/:id/deliveries":                    readers,
	"GET /webhooks/:id/deliveries/:deliveryId":        readers,
	"POST /webhooks/:id/deliveries/:deliveryId/retry": manageOnly,
	"POST /webhooks/:id/recover":                      manageOnly,
	"GET /webhooks/:id/lanes":                         readers,
	"GET /webhooks/:id/lanes/:laneId":                 readers,
	"POST /webhooks/:id/lanes/:laneId/retry":          manageOnly,
	"POST /webhooks/:id/lanes/:laneId/skip":           manageOnly,
	"POST /webhooks/:id/test":                         manageOnly,
	"POST /events":                                    publishers,
	"GET /events":                                     eventLog,
	"GET /events/:id":                                 eventLog,
	"GET /event-types":                                eventLog,
	"POST /portal-sessions":                           readers,
	"GET /notification-endpoints":                     readers,
	"POST /notification-endpoints":                    manageOnly,
	"GET /notification-endpoints/:id":                 readers,
	"PUT /notification-endpoints/:id":                 manageOnly,
	"PATCH /notification-endpoints/:id":               manageOnly,
	"DELETE /notification-endpoints/:id":              manageOnly,
	"POST /notification-endpoints/:id/test":           manageOnly,
	"GET /notices":                                    readers,
	"GET /audit-log":                                  readers,
	"GET /deliveries":                                 readers,
	"POST /replays":                                   manageOnly,
	"GET /replays/:id":                                readers,
	"DELETE /replays/:id":                             manageOnly,
	"B GET /websites":                                 readers,
	"B POST /websites":                                manageOnly,
	"B GET /websites/:id":                             readers,
	"B DELETE /websites/:id":                          manageOnly,
	"B POST /websites/:id/publish":                    manageOnly,
	"B POST /websites/:id/archive":                    manageOnly,
	"B POST /websites/:id/leads":                      publishers,
	"B POST /websites/:id/presaves":                   publishers,
	"B POST /websites/:id/analytics":                  publishers,
	"A GET /campaigns":                                readers,
	"A POST /campaigns":                               manageOnly,
	"A GET /campaigns/:id":                            readers,
	"A PATCH /campaigns/:id":                          manageOnly,
}

// publicRoutes answer without an API key: no scope applies.
var publicRoutes = []string{"GET /healthz", "GET /readyz", "GET /openapi.yaml", "GET /openapi-webhooks.yaml",
	"GET /schemas/events/:type/:version", "GET /schemas/deliveries/:variant", "GET /metrics"}

var scopedAccounts atomic.Int64

// scopedKeys issues a key of each scope to one new account.
func scopedKeys(t testing.TB, db *model.DB) map[model.KeyScope]string {
	t.Helper()
	email := fmt.Sprintf("scoped%d@example.com", scopedAccounts.Add(1))
	keys := map[model.KeyScope]string{}
	for _, s := range model.KeyScopes {
		k, _, err := model.CreateScopedAPIKey(context.Background(), db, email, string(s), s)
		if err != nil {
			t.Fatal(err)
		}
		keys[s] = k
	}
	return keys
}

// TestScopesOverEveryRoute (issue 46): every route of both variants, called with a read key and
// with a publish key of the account that owns what the path names, is 403 insufficient_scope in
// the variant's envelope, naming both scopes, exactly where the route's scopes leave the key out,
// and anything but 403 elsewhere. Every registered route must be in routeScopes or publicRoutes,
// and every entry there must be registered.
func TestScopesOverEveryRoute(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			keys := scopedKeys(t, e.db)
			covered := map[string]bool{}
			for _, rt := range api.Routes(e.srv) {
				if rt.Method == "echo_route_not_found" {
					continue
				}
				if strings.HasPrefix(rt.Path, "/api/svc/v2/") || strings.HasPrefix(rt.Path, "/v2/svc/v2/") {
					continue // variantRoutes lists them
				}
				if name := rt.Method + " " + rt.Path; !slices.Contains(publicRoutes, name) {
					t.Errorf("%s belongs to no variant and is not in publicRoutes: say who may call it", name)
				}
			}
			for _, rt := range variantRoutes(t, e, keys[model.ScopeManage]) {
				method, rest, _ := strings.Cut(rt.name, " ")
				rest = strings.TrimPrefix(strings.TrimPrefix(rest, "/api/svc/v2"), "/v2/svc/v2")
				name := method + " " + rest
				admits, ok := routeScopes[name]
				if !ok {
					name = rt.v.name + " " + name
					admits, ok = routeScopes[name]
				}
				if !ok {
					t.Errorf("%s is not in routeScopes: say which scopes may call it", rt.name)
					continue
				}
				covered[name] = true
				for _, scope := range []model.KeyScope{model.ScopeRead, model.ScopePublish} {
					r := e.do(t, rt.method, rt.path, rt.v.auth(keys[scope]), "")
					inside := strings.Contains(" "+admits+" ", " "+string(scope)+" ")
					switch {
					case inside && r.status == http.StatusForbidden:
						t.Errorf("%s with a %s key: 403, want the route served: %s", rt.name, scope, r.raw)
					case !inside && r.status != http.StatusForbidden:
						t.Errorf("%s with a %s key: %d, want 403: %s", rt.name, scope, r.status, r.raw)
					case !inside:
						rt.v.errEnvelope(t, r)
						needed := strings.Join(append(strings.Fields(admits), "manage"), " or ")
						want := fmt.Sprintf("this API key's scope is %s; this request needs the %s scope", scope, needed)
						if r.body["code"] != "insufficient_scope" || r.body["message"] != want {
							t.Errorf("%s with a %s key: %s, want code insufficient_scope, message %q", rt.name, scope, r.raw, want)
						}
					}
				}
			}
			for name := range routeScopes {
				if !covered[name] && !covered[strings.TrimPrefix(strings.TrimPrefix(name, "A "), "B ")] {
					t.Errorf("routeScopes lists %s, which the server does not route", name)
				}
			}
		})
	}
}

// TestReadKeyPortalLinkIsReadOnly (issue 46): a read key's portal link opens a read-only session,
// even when the request asks for a writable one: the portal shows the webhook, says read-only and
// offers no change. A manage key's link opens what it asks for; a publish key may make none.
func TestReadKeyPortalLinkIsReadOnly(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			pages, err := portal.New(portal.Config{Webhooks: e.uses, Accounts: e.access, Readiness: e.ready, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				PublicURL: "http://127.0.0.1:8080", FrameAncestors: "'self'", RateLimit: 1000, RateBurst: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					keys := scopedKeys(t, e.db)
					e.do(t, "POST", v.collection, v.auth(keys[model.ScopeManage]), createBody("https://portal-scope.example.com/hook", v.eventType)).expect(t, http.StatusCreated, "")
					for _, tc := range []struct {
						scope    model.KeyScope
						body     string
						readOnly bool
					}{
						{model.ScopeRead, `{"readOnly":false}`, true},
						{model.ScopeRead, "", true},
						{model.ScopeManage, `{"readOnly":false}`, false},
						{model.ScopeManage, `{"readOnly":true}`, true},
					} {
						r := e.do(t, "POST", portalPath(v), v.auth(keys[tc.scope]), tc.body)
						r.expect(t, http.StatusCreated, "")
						if got := r.data(t)["readOnly"]; got != tc.readOnly {
							t.Errorf("the %s key's link with body %q answers readOnly %v, want %v", tc.scope, tc.body, got, tc.readOnly)
						}
						link, _ := url.Parse(r.data(t)["url"].(string))
						rec := httptest.NewRecorder()
						pages.ServeHTTP(rec, httptest.NewRequest("GET", link.RequestURI(), nil))
						if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) == 0 {
							t.Fatalf("opening the %s key's link: %d\n%s", tc.scope, rec.Code, rec.Body)
						}
						req := httptest.NewRequest("GET", "/portal/", nil)
						req.AddCookie(rec.Result().Cookies()[0])
						rec = httptest.NewRecorder()
						pages.ServeHTTP(rec, req)
						page := rec.Body.String()
						if rec.Code != http.StatusOK || !strings.Contains(page, "portal-scope.example.com") {
							t.Fatalf("the %s key's session does not show the webhook: %d\n%s", tc.scope, rec.Code, page)
						}
						if got := strings.Contains(page, "read-only"); got != tc.readOnly {
							t.Errorf("the %s key's link with body %q: the page says read-only %v, want %v", tc.scope, tc.body, got, tc.readOnly)
						}
						var readOnly bool
						if err := e.db.NewSelect().Table("portal_sessions").Column("read_only").OrderExpr("id DESC").Limit(1).Scan(t.Context(), &readOnly); err != nil || readOnly != tc.readOnly {
							t.Errorf("the %s key's link with body %q opened a session read_only %v (%v), want %v", tc.scope, tc.body, readOnly, err, tc.readOnly)
						}
					}
					r := e.do(t, "POST", portalPath(v), v.auth(keys[model.ScopePublish]), `{"readOnly":true}`)
					r.expectError(t, v, http.StatusForbidden, "")
				})
			}
		})
	}
}
