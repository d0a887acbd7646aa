package api_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
)

// bodyRoutes holds every route that reads a request body (POST, PUT, PATCH), keyed as Echo names
// it, with one valid member of its body for the duplicate-key case; "" for the operations that take
// no parameters. TestBodiesRefused fails for a route of the server missing here, so a new POST
// route cannot skip these checks.
var bodyRoutes = map[string]string{
	"POST /api/svc/v2/webhooks":                                  `"url":"https://r.example.com/"`,
	"PUT /api/svc/v2/webhooks/:id":                               `"url":"https://r.example.com/"`,
	"PATCH /api/svc/v2/webhooks/:id":                             `"rateLimit":5`,
	"POST /api/svc/v2/webhooks/:id/secret/rotate":                `"secret":null`,
	"POST /api/svc/v2/webhooks/:id/retry":                        "",
	"POST /api/svc/v2/webhooks/:id/disable":                      "",
	"POST /api/svc/v2/webhooks/:id/enable":                       "",
	"POST /api/svc/v2/webhooks/:id/deliveries/:deliveryId/retry": "",
	"POST /api/svc/v2/webhooks/:id/recover":                      `"since":"2020-01-01T00:00:00Z"`,
	"POST /api/svc/v2/replays":                                   `"since":"2020-01-01T00:00:00Z"`,
	"POST /api/svc/v2/webhooks/:id/lanes/:laneId/retry":          "",
	"POST /api/svc/v2/webhooks/:id/lanes/:laneId/skip":           "",
	"POST /api/svc/v2/webhooks/:id/test":                         "",
	"POST /api/svc/v2/webhooks/filter-test":                      `"eventType":"campaign.created"`,
	"POST /api/svc/v2/events":                                    `"eventType":"campaign.created"`,
	"POST /api/svc/v2/campaigns":                                 `"name":"n"`,
	"PATCH /api/svc/v2/campaigns/:id":                            `"budget":1`,
	"POST /api/svc/v2/portal-sessions":                           `"ttl":60`,
	"POST /api/svc/v2/notification-endpoints":                    `"kind":"chat"`,
	"PUT /api/svc/v2/notification-endpoints/:id":                 `"types":null`,
	"PATCH /api/svc/v2/notification-endpoints/:id":               `"types":null`,
	"POST /api/svc/v2/notification-endpoints/:id/test":           "",
	"POST /v2/svc/v2/webhooks":                                   `"url":"https://r.example.com/"`,
	"PUT /v2/svc/v2/webhooks/:id":                                `"url":"https://r.example.com/"`,
	"PATCH /v2/svc/v2/webhooks/:id":                              `"maxInFlight":2`,
	"POST /v2/svc/v2/webhooks/:id/secret/rotate":                 `"secret":null`,
	"POST /v2/svc/v2/webhooks/:id/retry":                         "",
	"POST /v2/svc/v2/webhooks/:id/disable":                       "",
	"POST /v2/svc/v2/webhooks/:id/enable":                        "",
	"POST /v2/svc/v2/webhooks/:id/deliveries/:deliveryId/retry":  "",
	"POST /v2/svc/v2/webhooks/:id/recover":                       `"since":"2020-01-01T00:00:00Z"`,
	"POST /v2/svc/v2/replays":                                    `"since":"2020-01-01T00:00:00Z"`,
	"POST /v2/svc/v2/webhooks/:id/lanes/:laneId/retry":           "",
	"POST /v2/svc/v2/webhooks/:id/lanes/:laneId/skip":            "",
	"POST /v2/svc/v2/webhooks/:id/test":                          "",
	"POST /v2/svc/v2/webhooks/filter-test":                       `"eventType":"lead.captured"`,
	"POST /v2/svc/v2/events":                                     `"event":"lead.captured"`,
	"POST /v2/svc/v2/websites":                                   `"slug":"s"`,
	"POST /v2/svc/v2/websites/:id/publish":                       `"scheduledAt":"2999-01-01T00:00:00Z"`,
	"POST /v2/svc/v2/websites/:id/archive":                       "",
	"POST /v2/svc/v2/websites/:id/leads":                         `"email":"a@example.com"`,
	"POST /v2/svc/v2/websites/:id/presaves":                      `"platform":"spotify"`,
	"POST /v2/svc/v2/websites/:id/analytics":                     `"metric":"pageViews"`,
	"POST /v2/svc/v2/portal-sessions":                            `"readOnly":true`,
	"POST /v2/svc/v2/notification-endpoints":                     `"kind":"chat"`,
	"PUT /v2/svc/v2/notification-endpoints/:id":                  `"types":null`,
	"PATCH /v2/svc/v2/notification-endpoints/:id":                `"types":null`,
	"POST /v2/svc/v2/notification-endpoints/:id/test":            "",
}

// withContentType presents auth and then replaces the JSON Content-Type e.do sets.
func withContentType(auth func(*http.Request), ct string) func(*http.Request) {
	return func(r *http.Request) {
		auth(r)
		r.Header.Set("Content-Type", ct)
	}
}

// route is a route of one variant with real ids in its path, so that no handler stops at 404
// before it reads its input.
type route struct {
	name, method, path string
	v                  variantCase
	auth               func(*http.Request)
}

// variantRoutes lists every route of both variants, each with a webhook, delivery, campaign,
// website or notification endpoint of key's account in its path.
func variantRoutes(t *testing.T, e *testEnv, key string) []route {
	t.Helper()
	ids := map[string]map[string]string{}
	for _, v := range variants {
		hook, d := hookWithDelivery(t, e, v, v.auth(key))
		ids[v.name] = map[string]string{"webhooks": strings.TrimPrefix(hook, v.collection+"/"), "events": fmt.Sprint(d.EventID), "deliveryId": fmt.Sprint(d.ID)}
	}
	for _, v := range variants {
		r := e.do(t, "POST", strings.TrimSuffix(v.collection, "/webhooks")+"/notification-endpoints", v.auth(key), `{"kind":"chat","url":"https://chat.example.com/hook"}`)
		ids[v.name]["notification-endpoints"] = jsonNumber(r.data(t)["id"])
	}
	for _, v := range variants { // a replay, stored as the use case stores one (a real one needs Temporal)
		var w model.Webhook
		if err := e.db.NewSelect().Model(&w).Where("id = ?", ids[v.name]["webhooks"]).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := &model.Replay{AccountID: w.AccountID, Variant: w.Variant, Criteria: `{"since":"2020-01-01T00:00:00Z","until":"2020-01-02T00:00:00Z","states":["exhausted"]}`}
		if err := model.CreateReplay(context.Background(), e.db, r, nil, 1); err != nil {
			t.Fatal(err)
		}
		ids[v.name]["replays"] = fmt.Sprint(r.ID)
	}
	ids["A"]["campaigns"] = jsonNumber(e.do(t, "POST", "/api/svc/v2/campaigns", variants[0].auth(key), campaignBody).data(t)["id"])
	ids["B"]["websites"] = jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", variants[1].auth(key), `{"brandId":3,"slug":"bodies"}`).data(t)["id"])

	var routes []route
	for _, rt := range api.Routes(e.srv) {
		v := variants[0]
		switch {
		case strings.HasPrefix(rt.Path, "/v2/svc/v2/"):
			v = variants[1]
		case !strings.HasPrefix(rt.Path, "/api/svc/v2/"):
			continue // /healthz, /metrics and the like belong to no variant
		}
		resource := strings.Split(strings.TrimPrefix(strings.TrimPrefix(rt.Path, "/api/svc/v2/"), "/v2/svc/v2/"), "/")[0]
		path := strings.NewReplacer(":id", ids[v.name][resource], ":deliveryId", ids[v.name]["deliveryId"], ":laneId", "1").Replace(rt.Path)
		routes = append(routes, route{name: rt.Method + " " + rt.Path, method: rt.Method, path: path, v: v, auth: v.auth(key)})
	}
	return routes
}

// bodyRoute is a route that reads a body, with its entry in bodyRoutes.
type bodyRoute struct {
	route
	member string
}

// bodyRoutesOf lists the server's routes that read a body (POST, PUT, PATCH), as variantRoutes
// does. It fails t for a route missing from bodyRoutes, and for an entry there that the server
// does not route.
func bodyRoutesOf(t *testing.T, e *testEnv, key string) []bodyRoute {
	t.Helper()
	byName := map[string]route{}
	for _, rt := range variantRoutes(t, e, key) {
		byName[rt.name] = rt
	}
	var routes []bodyRoute
	covered := map[string]bool{}
	for _, rt := range api.Routes(e.srv) {
		if rt.Method != http.MethodPost && rt.Method != http.MethodPut && rt.Method != http.MethodPatch {
			continue
		}
		name := rt.Method + " " + rt.Path
		member, ok := bodyRoutes[name]
		if !ok {
			t.Errorf("%s reads a body but has no entry in bodyRoutes: add one", name)
			continue
		}
		covered[name] = true
		routes = append(routes, bodyRoute{route: byName[name], member: member})
	}
	for name := range bodyRoutes {
		if !covered[name] {
			t.Errorf("bodyRoutes lists %s, which the server does not route", name)
		}
	}
	return routes
}

// TestBodiesRefused (issue 18): every route that reads a body, on both variants and both
// databases, refuses malformed JSON, an unknown field, a Content-Type that is not JSON and a key
// sent twice with 400 invalid_request, naming the field where there is one, and changes nothing.
func TestBodiesRefused(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			for _, rt := range bodyRoutesOf(t, e, newKey(t, e.db)) {
				v, path, auth, member := rt.v, rt.path, rt.auth, rt.member
				t.Run(rt.name, func(t *testing.T) {
					for _, c := range []struct {
						name, body, field, says string
						auth                    func(*http.Request)
					}{
						{"malformed JSON", `{`, "", "malformed JSON", auth},
						{"trailing data", `{}{}`, "", "single JSON object", auth},
						{"null", `null`, "", "not null", auth},
						{"array", `[]`, "", "JSON object", auth},
						{"unknown field", `{"bogus":1}`, "bogus", `unknown field "bogus"`, auth},
						{"text/plain", `{}`, "", "Content-Type", withContentType(auth, "text/plain")},
						{"form", `{}`, "", "Content-Type", withContentType(auth, "application/x-www-form-urlencoded")},
						{"unparsable Content-Type", `{}`, "", "Content-Type", withContentType(auth, "application/json; charset")},
					} {
						r := e.do(t, rt.method, path, c.auth, c.body)
						r.expectError(t, v, http.StatusBadRequest, c.field)
						if r.body["code"] != "invalid_request" || !strings.Contains(r.body["message"].(string), c.says) {
							t.Errorf("%s: %s, want invalid_request saying %q", c.name, r.raw, c.says)
						}
					}
					if member == "" {
						return
					}
					field := strings.Trim(strings.SplitN(member, ":", 2)[0], `"`)
					r := e.do(t, rt.method, path, auth, "{"+member+","+member+"}")
					r.expectError(t, v, http.StatusBadRequest, field)
					if !strings.Contains(r.body["message"].(string), "repeats the key") {
						t.Errorf("duplicate %s: %s", field, r.raw)
					}
					// encoding/json would read FIELD as field, and let the last of the two win.
					key, value, _ := strings.Cut(member, ":")
					other := strings.ToUpper(key)
					for _, body := range []string{"{" + other + ":" + value + "}", "{" + member + "," + other + ":" + value + "}"} {
						r := e.do(t, rt.method, path, auth, body)
						r.expectError(t, v, http.StatusBadRequest, strings.Trim(other, `"`))
						if !strings.Contains(r.body["message"].(string), "case-sensitive") {
							t.Errorf("%s: %s", body, r.raw)
						}
					}
				})
			}
		})
	}
}

// TestBodyLimitNamed (issue 27): a body one byte over its route's limit is 413 payload_too_large
// whose message names that route's limit (256 KiB on <prefix>/events, 64 KiB elsewhere), whether
// the request announced its length or sent its body chunked, on every route that reads a body;
// a body of exactly the limit is read (and refused for its unknown field, not its size).
func TestBodyLimitNamed(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	for _, rt := range bodyRoutesOf(t, e, newKey(t, e.db)) {
		limit, name := 64<<10, "64 KiB"
		if strings.HasSuffix(rt.path, "/events") {
			limit, name = 256<<10, "256 KiB"
		}
		t.Run(rt.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				for _, size := range []int{limit, limit + 1} {
					body := `{"pad":"` + strings.Repeat("x", size-len(`{"pad":""}`)) + `"}`
					var rd io.Reader = strings.NewReader(body)
					if chunked {
						rd = io.MultiReader(rd) // no length known: httptest sends it as a chunked body does
					}
					req := httptest.NewRequest(rt.method, rt.path, rd)
					req.Header.Set("Content-Type", "application/json")
					if chunked {
						req.TransferEncoding = []string{"chunked"}
					}
					rt.auth(req)
					r := e.serve(t, req)
					if size == limit {
						if r.status != http.StatusBadRequest || r.body["field"] != "pad" {
							t.Errorf("chunked %v, %d bytes: %d %s, want 400 naming pad", chunked, size, r.status, r.raw)
						}
						continue
					}
					if msg, _ := r.body["message"].(string); r.status != http.StatusRequestEntityTooLarge ||
						r.body["code"] != "payload_too_large" || !strings.Contains(msg, "larger than "+name) {
						t.Errorf("chunked %v, %d bytes: %d %s, want 413 payload_too_large naming %s", chunked, size, r.status, r.raw, name)
					}
					rt.v.errEnvelope(t, r)
				}
			}
		})
	}
}

// TestNoBodyOperationsAcceptEmpty (issue 18): the operations without parameters take no body, an
// empty one, white space or {}, with or without a Content-Type (a body-less request's Content-Type
// says nothing); website publish takes the same, and archive too.
func TestNoBodyOperationsAcceptEmpty(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook := v.collection + "/" + jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"])
		for _, body := range []string{"", " \n", "{}", " { } "} {
			e.do(t, "POST", hook+"/disable", auth, body).expect(t, http.StatusOK, "")
			e.do(t, "POST", hook+"/enable", auth, body).expect(t, http.StatusOK, "")
			e.do(t, "POST", hook+"/secret/rotate", auth, body).expect(t, http.StatusOK, "")
			// Temporal is not configured here: past the body, whatever retry answers is not 400.
			if r := e.do(t, "POST", hook+"/retry", auth, body); r.status == http.StatusBadRequest {
				t.Fatalf("retry with body %q: %s", body, r.raw)
			}
		}
		e.do(t, "POST", hook+"/disable", withContentType(auth, "text/plain"), "").expect(t, http.StatusOK, "")
		e.do(t, "POST", hook+"/retry", auth, `{"since":"2020-01-01T00:00:00Z"}`).expectError(t, v, http.StatusBadRequest, "since")
		if v.name == "B" {
			for i, body := range []string{"", "{}"} {
				site := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, fmt.Sprintf(`{"brandId":3,"slug":"s%d"}`, i)).data(t)["id"])
				e.do(t, "POST", site+"/publish", auth, body).expect(t, http.StatusOK, "")
				e.do(t, "POST", site+"/archive", auth, body).expect(t, http.StatusOK, "")
			}
		}
	})
}

// TestRotateWithOwnSecret (issue 18): rotate takes the caller's own secret, as Svix and Stripe
// do: a strong one becomes the signing secret (GET .../secret returns it, the Standard Webhooks
// signature is made with it) and the previous one keeps its 24 hours; a weak or malformed one is 422
// naming secret, never echoed, and changes nothing.
func TestRotateWithOwnSecret(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		created := e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)
		one := v.collection + "/" + jsonNumber(created["id"])
		random := func(n int) []byte {
			b := make([]byte, n)
			_, _ = rand.Read(b)
			return b
		}
		mine := secretbox.SecretPrefix + base64.StdEncoding.EncodeToString(random(24))

		r := e.do(t, "POST", one+"/secret/rotate", auth, fmt.Sprintf(`{"secret":%q}`, mine))
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		if r.data(t)["secret"] != mine || r.data(t)["previousSecretExpiresAt"] == nil {
			t.Fatalf("rotate with my secret = %s", r.raw)
		}
		if got := e.do(t, "GET", one+"/secret", auth, "").data(t)["secret"]; got != mine {
			t.Fatalf("GET secret after rotating to mine = %v", got)
		}
		prev, err := model.ListPreviousSecrets(context.Background(), e.db, int64(created["id"].(float64)))
		if err != nil || len(prev) != 1 || prev[0].ExpiresAt.Before(time.Now().Add(23*time.Hour)) {
			t.Fatalf("previous secrets = %+v, %v; want the created one, for 24 hours", prev, err)
		}
		if _, err := wire.StandardSignature("msg_1_1", time.Now(), []byte("{}"), mine, created["secret"].(string)); err != nil {
			t.Fatalf("my secret does not sign: %v", err)
		}
		// null is no secret: webhookd makes one.
		r = e.do(t, "POST", one+"/secret/rotate", auth, `{"secret":null}`)
		r.expect(t, http.StatusOK, "")
		current := r.data(t)["secret"].(string)
		if current == mine || !strings.HasPrefix(current, secretbox.SecretPrefix) {
			t.Fatalf("rotate with null made %q", current)
		}

		text := base64.StdEncoding.EncodeToString([]byte("correct horse battery staple, 32b"))
		for _, c := range []struct{ name, secret string }{
			{"issue 18's", "whsec_AAAA"},
			{"no prefix", base64.StdEncoding.EncodeToString(random(32))},
			{"other prefix", "sk_live_" + base64.StdEncoding.EncodeToString(random(32))},
			{"not base64", "whsec_" + strings.Repeat("!", 44)},
			{"URL-safe alphabet", "whsec_" + strings.Repeat("-_", 22)},
			{"no padding", "whsec_" + base64.RawStdEncoding.EncodeToString(random(32))},
			{"space inside", "whsec_" + base64.StdEncoding.EncodeToString(random(12)) + " " + base64.StdEncoding.EncodeToString(random(12))},
			{"23 bytes", "whsec_" + base64.StdEncoding.EncodeToString(random(23))},
			{"65 bytes", "whsec_" + base64.StdEncoding.EncodeToString(random(65))},
			{"zeros", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))},
			{"a repeated pattern", "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x01\x02\x03\x04\xff", 8)))},
			{"a password", "whsec_" + text},
			{"empty", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(t, "POST", one+"/secret/rotate", auth, fmt.Sprintf(`{"secret":%q}`, c.secret))
				r.expectError(t, v, http.StatusUnprocessableEntity, "secret")
				if c.secret != "" && strings.Contains(string(r.raw), strings.TrimPrefix(c.secret, "whsec_")) {
					t.Fatalf("the refusal echoes the secret: %s", r.raw)
				}
			})
		}
		e.do(t, "POST", one+"/secret/rotate", auth, `{"secret":5}`).expectError(t, v, http.StatusBadRequest, "secret")
		if got := e.do(t, "GET", one+"/secret", auth, "").data(t)["secret"]; got != current {
			t.Fatalf("a refused rotation changed the secret to %v", got)
		}
	})
}

// TestIDsAreCanonical (issue 18): an id is written one way. A sign, a leading zero, white space or
// a fraction is 400 naming the id, in the path (every resource) and in ?after=, never another name
// for a valid id.
func TestIDsAreCanonical(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook, d := hookWithDelivery(t, e, v, auth)
		prefix := strings.TrimSuffix(v.collection, "/webhooks")
		hookID := strings.TrimPrefix(hook, v.collection+"/")
		paths := []struct{ format, field, valid string }{
			{prefix + "/events/%s", "id", fmt.Sprint(d.EventID)},
			{v.collection + "/%s", "id", hookID},
			{v.collection + "/%s/secret", "id", hookID},
			{hook + "/deliveries/%s", "deliveryId", fmt.Sprint(d.ID)},
		}
		if v.name == "A" {
			id := jsonNumber(e.do(t, "POST", "/api/svc/v2/campaigns", auth, campaignBody).data(t)["id"])
			paths = append(paths, struct{ format, field, valid string }{"/api/svc/v2/campaigns/%s", "id", id})
		} else {
			id := jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"ids"}`).data(t)["id"])
			paths = append(paths, struct{ format, field, valid string }{"/v2/svc/v2/websites/%s", "id", id})
		}
		for _, p := range paths {
			e.do(t, "GET", fmt.Sprintf(p.format, p.valid), auth, "").expect(t, http.StatusOK, "")
			for _, bad := range []string{"+" + p.valid, "0" + p.valid, "%20" + p.valid, p.valid + "%20", "-" + p.valid, p.valid + ".0", "0", "00", "-0", "0x1", "1e1", "9223372036854775808"} {
				e.do(t, "GET", fmt.Sprintf(p.format, bad), auth, "").expectError(t, v, http.StatusBadRequest, p.field)
			}
		}
		for _, list := range []string{v.collection, prefix + "/events"} {
			e.do(t, "GET", list+"?after=0", auth, "").expect(t, http.StatusOK, "")
			for _, bad := range []string{"%2B2", "02", "00", "-0", "%202", "-2", "2.0"} {
				e.do(t, "GET", list+"?after="+bad, auth, "").expectError(t, v, http.StatusBadRequest, "after")
			}
		}
		e.do(t, "GET", hook+"/deliveries?before=2", auth, "").expect(t, http.StatusOK, "")
		for _, bad := range []string{"%2B2", "02", "00", "0", "-0", "%202", "-2", "2.0"} {
			e.do(t, "GET", hook+"/deliveries?before="+bad, auth, "").expectError(t, v, http.StatusBadRequest, "before")
		}
	})
}

// TestEchoedInputIsCapped (issue 18): an error quotes at most 64 characters of a caller's value,
// cut with "...", whatever its size: an eventType, a status, an unknown field's name and a field
// named by a caller's key.
func TestEchoedInputIsCapped(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		huge := strings.Repeat("x", 200<<10)
		typeField := map[string]string{"A": "eventType", "B": "event"}[v.name]
		for _, c := range []struct {
			name, method, path, body string
			status                   int
			field                    string
		}{
			{"published eventType", "POST", eventsPath(v), fmt.Sprintf(`{%q:%q,"data":{}}`, typeField, huge), 422, typeField},
			{"registered eventType", "POST", v.collection, createBody("https://r.example.com/", huge[:60<<10]), 422, "eventType"},
			{"listed eventType", "GET", v.collection + "?eventType=" + huge, "", 422, "eventType"},
			{"listed status", "GET", v.collection + "?status=" + huge, "", 422, "status"},
			{"event log eventType", "GET", eventsPath(v) + "?eventType=" + huge, "", 422, "eventType"},
			{"unknown field", "POST", v.collection, fmt.Sprintf(`{%q:1}`, huge[:60<<10]), 400, huge[:64] + "..."},
			{"unknown data field", "POST", eventsPath(v), eventBody(v, v.eventType, mergeMap(validData[v.name], huge, 1)), 422, "data." + huge[:59] + "..."},
			{"huge number for a string", "POST", v.collection, `{"url":` + strings.Repeat("9", 60<<10) + `}`, 400, "url"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(t, c.method, c.path, auth, c.body)
				r.expectError(t, v, c.status, c.field)
				if len(r.raw) > 1024 {
					t.Fatalf("the error is %d bytes: %.300s...", len(r.raw), r.raw)
				}
				if c.status == 422 && c.field == typeField && !strings.Contains(r.body["message"].(string), `"`+huge[:64]+`..."`) {
					t.Fatalf("message %q does not quote the first 64 characters", r.body["message"])
				}
			})
		}
	})
}

// TestResendOfDeletedWebhooksDelivery (issue 18): deleting a webhook cancels its deliveries, and
// through the API they are then 404 with their webhook, never 409: the 409 for a canceled delivery
// (TestRetryOneDelivery) is reached only when its workflow was canceled by hand in Temporal while its
// webhook lives.
func TestResendOfDeletedWebhooksDelivery(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		hook, d := hookWithDelivery(t, e, v, auth)
		e.do(t, "DELETE", hook, auth, "").expect(t, http.StatusOK, "")
		if got := deliveryState(t, e, d.ID); got != model.DeliveryCanceled {
			t.Fatalf("state after delete = %s, want canceled", got)
		}
		path := fmt.Sprintf("%s/deliveries/%d", hook, d.ID)
		e.do(t, "POST", path+"/retry", auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "GET", path, auth, "").expectError(t, v, http.StatusNotFound, "")
	})
}

// TestNestedFieldNamesAreExact (issue 18): a nested field in another case is refused with its path;
// keys that are the caller's own (customFields) keep their case and may differ only by it.
func TestNestedFieldNamesAreExact(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			v := variants[1]
			auth := v.auth(newKey(t, e.db))
			site := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"case"}`).data(t)["id"])
			e.do(t, "POST", site+"/publish", auth, "").expect(t, http.StatusOK, "")
			lead := func(source, custom string) string {
				return `{"collectDataId":"c","email":"a@example.com","phone":"+4915123456789","name":"n","customFields":` + custom +
					`,"source":{"referrer":"https://x.example.com","userAgent":"","ipAddress":"203.0.113.9",` + source + `}}`
			}
			e.do(t, "POST", site+"/leads", auth, lead(`"Country":"DE"`, `{}`)).expectError(t, v, http.StatusBadRequest, "source.Country")
			e.do(t, "POST", site+"/leads", auth, lead(`"country":"DE"`, `{"City":"a","city":"b"}`)).expect(t, http.StatusAccepted, "")
			e.do(t, "POST", site+"/presaves", auth, `{"platform":"spotify","fanEmail":null,"releaseDate":"2026-12-01T00:00:00Z","releaseUrl":"https://open.example.com/a","boosts":{"followedartist":true}}`).
				expectError(t, v, http.StatusBadRequest, "boosts.followedartist")
		})
	}
}
