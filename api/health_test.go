package api_test

import (
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/portal"
)

// healthAttempt is one attempt the health tests record: when, against the current hour, how long
// it took, and how it failed ("" for a success).
type healthAttempt struct {
	at      time.Duration
	latency int64
	class   string
	status  int
}

// healthFixture is a webhook of key's account with a known history: the attempts of four
// deliveries in the window, the second one exhausted, and one delivery's attempt 30 hours ago,
// before a 24-hour window. It returns the webhook's path and the two hours that hold attempts.
func healthFixture(t *testing.T, e *testEnv, v variantCase, key string) (path string, h1, h2 time.Time) {
	t.Helper()
	ctx := t.Context()
	r := e.do(t, "POST", v.collection, v.auth(key), createBody("https://r.example.com/health", v.eventType))
	r.expect(t, http.StatusCreated, "")
	path = v.collection + "/" + jsonNumber(r.data(t)["id"])
	account, _, err := model.Authenticate(ctx, e.db, key)
	if err != nil {
		t.Fatal(err)
	}
	var w model.Webhook
	if err := e.db.NewSelect().Model(&w).Where("id = ?", int64(r.data(t)["id"].(float64))).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	now := model.Now().Truncate(time.Hour)
	h1, h2 = now.Add(-3*time.Hour), now.Add(-2*time.Hour)
	record := func(attempts ...healthAttempt) int64 {
		res, err := model.InsertEvent(ctx, e.db, model.NewEvent{AccountID: account.ID, Variant: w.Variant, EventType: w.EventType, Data: `{}`, OnlyWebhook: w.ID})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Deliveries[0].ID
		for i, a := range attempts {
			o := model.AttemptOutcome{Success: a.class == ""}
			o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = d, i+1, w.URL, now.Add(a.at), a.latency
			if a.class != "" {
				class, msg := a.class, fmt.Sprintf("receiver failed: %s", a.class)
				o.ErrorClass, o.Error = &class, &msg
				if a.status != 0 {
					o.StatusCode = &a.status
				}
			}
			if _, err := model.RecordAttempt(ctx, e.db, &w, o); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	record(healthAttempt{at: -30 * time.Hour, latency: 9999}) // before a 24-hour window
	record(healthAttempt{-3*time.Hour + 5*time.Minute, 100, "http_status", 500}, healthAttempt{at: -3*time.Hour + 10*time.Minute, latency: 20})
	record(healthAttempt{at: -3*time.Hour + 20*time.Minute, latency: 10})
	record(healthAttempt{at: -3*time.Hour + 30*time.Minute, latency: 50})
	// Failing from here on: retried once, then exhausted.
	d := record(healthAttempt{at: -2*time.Hour + time.Minute, latency: 300, class: "timeout"},
		healthAttempt{-2*time.Hour + 2*time.Minute, 400, "http_status", 503})
	if _, err := model.MarkExhausted(ctx, e.db, model.Exhaustion{DeliveryID: d, WebhookID: w.ID, LastAttemptAt: now.Add(-2*time.Hour + 2*time.Minute)}, notices.Rules{}); err != nil {
		t.Fatal(err)
	}
	return path, h1, h2
}

// TestHealth: GET <collection>/<id>/health counts the attempts per UTC hour and in total, takes the
// success rate and the nearest-rank latency percentiles over the range, names the last failed
// attempt, shows the status as the webhook does and when auto-disable would apply, in both
// variants and on both databases; another account's, the other variant's and a deleted webhook
// are 404, a range it does not know is 400 naming range.
func TestHealth(t *testing.T) {
	rule := notices.DisableRule{After: 120 * time.Hour, MinExhausted: 1}
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), func(c *envConfig) { c.Disable = rule })
			for i, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					key := newKey(t, e.db)
					path, h1, h2 := healthFixture(t, e, v, key)
					r := e.do(t, "GET", path+"/health", v.auth(key), "")
					r.expect(t, http.StatusOK, "")
					v.okEnvelope(t, r)
					d := r.data(t)
					if d["range"] != "24h" {
						t.Errorf("range = %v, want the default 24h", d["range"])
					}
					from, to := healthTime(t, d["from"]), healthTime(t, d["to"])
					if !from.Equal(to.Add(-24*time.Hour).Truncate(time.Hour)) || time.Since(to) > time.Minute {
						t.Errorf("from %v, to %v: want the hour holding to-24h, and now", from, to)
					}
					hours := healthHours(t, d)
					if len(hours) < 24 || len(hours) > 25 || !healthTime(t, hours[0]["hour"]).Equal(from) {
						t.Fatalf("%d hours from %v: %v", len(hours), hours[0]["hour"], hours)
					}
					counts := map[time.Time]string{}
					for _, h := range hours {
						if c := fmt.Sprintf("%v/%v/%v", h["delivered"], h["retried"], h["failed"]); c != "0/0/0" {
							counts[healthTime(t, h["hour"])] = c
						}
					}
					if want := map[time.Time]string{h1: "3/1/0", h2: "0/1/1"}; fmt.Sprint(counts) != fmt.Sprint(want) {
						t.Errorf("hours with attempts = %v, want %v", counts, want)
					}
					if got := fmt.Sprint(d["totals"]); got != "map[attempts:6 delivered:3 failed:1 retried:2]" {
						t.Errorf("totals = %s", got)
					}
					if d["successRate"] != 0.5 {
						t.Errorf("successRate = %v, want 0.5 (3 of 6)", d["successRate"])
					}
					// Latencies 10 20 50 100 300 400: ranks ceil(3) and ceil(5.7); 9999 is outside.
					if got := fmt.Sprint(d["latency"]); got != "map[attempts:6 p50Ms:50 p95Ms:400]" {
						t.Errorf("latency = %s", got)
					}
					want := fmt.Sprintf("map[error:receiver failed: http_status errorClass:http_status startedAt:%s statusCode:503]",
						h2.Add(2*time.Minute).Format("2006-01-02T15:04:05.000Z"))
					if got := fmt.Sprint(d["lastError"]); got != want {
						t.Errorf("lastError = %s, want %s", got, want)
					}
					webhook := e.do(t, "GET", path, v.auth(key), "").data(t)
					if d["status"] != webhook["status"] || d["status"] != []string{"failed", "failing"}[i] || d["disabled"] != false {
						t.Errorf("status %v, disabled %v; the webhook shows %v", d["status"], d["disabled"], webhook["status"])
					}
					// Failing since the first failure after the last success, one delivery exhausted.
					if got, want := d["disableAt"], h2.Add(time.Minute).Add(rule.After).Format("2006-01-02T15:04:05.000Z"); got != want {
						t.Errorf("disableAt = %v, want %s", got, want)
					}
					if !healthTime(t, d["lastAttemptAt"]).Equal(h2.Add(2 * time.Minute)) {
						t.Errorf("lastAttemptAt = %v", d["lastAttemptAt"])
					}

					week := e.do(t, "GET", path+"/health?range=7d", v.auth(key), "")
					week.expect(t, http.StatusOK, "")
					wd := week.data(t)
					if n := len(healthHours(t, wd)); wd["range"] != "7d" || n < 7*24 || n > 7*24+1 {
						t.Errorf("7d: range %v, %d hours", wd["range"], n)
					}
					// The attempt 30 hours ago is in this week's range.
					if got := fmt.Sprint(wd["totals"], wd["latency"]); got != "map[attempts:7 delivered:4 failed:1 retried:2] map[attempts:7 p50Ms:100 p95Ms:9999]" {
						t.Errorf("7d totals and latency = %s", got)
					}

					e.do(t, "GET", path+"/health?range=1y", v.auth(key), "").expectError(t, v, http.StatusBadRequest, "range")
					e.do(t, "GET", path+"/health", v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
					other := variants[1-i]
					e.do(t, "GET", other.collection+strings.TrimPrefix(path, v.collection)+"/health", other.auth(key), "").expectError(t, other, http.StatusNotFound, "")

					// Disabled: the rule no longer applies.
					e.do(t, "POST", path+"/disable", v.auth(key), "").expect(t, http.StatusOK, "")
					dd := e.do(t, "GET", path+"/health", v.auth(key), "").data(t)
					if dd["disabled"] != true || dd["disableAt"] != nil || dd["status"] != []string{"failed", "disabled"}[i] {
						t.Errorf("disabled: disabled %v, disableAt %v, status %v", dd["disabled"], dd["disableAt"], dd["status"])
					}
					e.do(t, "DELETE", path, v.auth(key), "").expect(t, http.StatusOK, "")
					e.do(t, "GET", path+"/health", v.auth(key), "").expectError(t, v, http.StatusNotFound, "")
				})
			}
		})
	}
}

// TestHealthQuiet: a webhook without attempts has empty hours, no rate, latency or last error,
// and with the rule off (the default here) no disableAt.
func TestHealthQuiet(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			key := newKey(t, e.db)
			r := e.do(t, "POST", v.collection, v.auth(key), createBody("https://r.example.com/quiet", v.eventType))
			path := v.collection + "/" + jsonNumber(r.data(t)["id"])
			d := e.do(t, "GET", path+"/health?range=24h", v.auth(key), "").data(t)
			for _, field := range []string{"successRate", "latency", "lastError", "lastAttemptAt", "disableAt"} {
				if v, ok := d[field]; !ok || v != nil {
					t.Errorf("%s = %v, want null", field, v)
				}
			}
			if got := fmt.Sprint(d["totals"]); got != "map[attempts:0 delivered:0 failed:0 retried:0]" {
				t.Errorf("totals = %s", got)
			}
		})
	}
}

// TestHealthIsThePortals: the portal's endpoint page draws the figures the API's health answers
// for the same webhook and range: each hour's bar, the success rate, the latency percentiles and
// when auto-disable would apply.
func TestHealthIsThePortals(t *testing.T) {
	rule := notices.DisableRule{After: 120 * time.Hour, MinExhausted: 1}
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Disable = rule })
	pages, err := portal.New(portal.Config{Webhooks: e.uses, Accounts: e.access, Readiness: e.ready, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PublicURL: "http://127.0.0.1:8080", FrameAncestors: "'self'", RateLimit: 1000, RateBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			key := newKey(t, e.db)
			path, _, _ := healthFixture(t, e, v, key)
			account, _, err := model.Authenticate(t.Context(), e.db, key)
			if err != nil {
				t.Fatal(err)
			}
			cookie := portalSession(t, e.db, pages, account.ID, model.Variants[i])
			for _, rangeName := range []string{"24h", "7d"} {
				d := e.do(t, "GET", path+"/health?range="+rangeName, v.auth(key), "").data(t)
				req := httptest.NewRequest("GET", "/portal/webhooks/"+strings.TrimPrefix(path, v.collection+"/")+"?range="+rangeName, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				pages.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Fatalf("portal page: %d\n%s", rec.Code, rec.Body)
				}
				page := html.UnescapeString(rec.Body.String())
				var want []string
				for _, h := range healthHours(t, d) {
					if h["delivered"].(float64)+h["retried"].(float64)+h["failed"].(float64) > 0 {
						want = append(want, fmt.Sprintf("%s UTC: %v delivered, %v retried, %v failed",
							healthTime(t, h["hour"]).Format("2006-01-02 15:04"), h["delivered"], h["retried"], h["failed"]))
					}
				}
				bars := len(want)
				if bars == 0 {
					t.Fatal("no hour with attempts: the comparison would prove nothing")
				}
				latency := d["latency"].(map[string]any)
				want = append(want, fmt.Sprintf("p50 %v ms, p95 %v ms over %v attempts", latency["p50Ms"], latency["p95Ms"], latency["attempts"]),
					"would be disabled at "+healthTime(t, d["disableAt"]).Format("2006-01-02 15:04:05 UTC"))
				if rangeName == "24h" {
					// The page's rate is the last 24 hours', whatever the chart's range.
					totals := d["totals"].(map[string]any)
					want = append(want, fmt.Sprintf(`value="%.0f"`, d["successRate"].(float64)*100),
						fmt.Sprintf("%v %% of %v", d["successRate"].(float64)*100, totals["attempts"]))
				}
				for _, s := range want {
					if !strings.Contains(page, s) {
						t.Errorf("range %s: the portal's page lacks %q, which the API answers:\n%s", rangeName, s, page)
					}
				}
				if drawn := strings.Count(page, `<g class="chart-bar">`); drawn != bars {
					t.Errorf("range %s: %d bars drawn, the API has %d hours with attempts", rangeName, drawn, bars)
				}
			}
		})
	}
}

// portalSession opens a portal session of the account and variant, as a signed link does.
func portalSession(t *testing.T, db *model.DB, pages *portal.Server, accountID int64, v model.Variant) *http.Cookie {
	t.Helper()
	token, _, err := model.CreatePortalLink(t.Context(), db, model.NewPortalLink{AccountID: accountID, Variant: v, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	pages.ServeHTTP(rec, httptest.NewRequest("GET", "/portal/enter?token="+token, nil))
	for _, c := range rec.Result().Cookies() {
		if c.Name == portal.CookieName {
			return c
		}
	}
	t.Fatalf("no session cookie: %d %v", rec.Code, rec.Header())
	return nil
}

func healthTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("not a time: %v", v)
	}
	return at
}

func healthHours(t *testing.T, d map[string]any) []map[string]any {
	t.Helper()
	raw, ok := d["hours"].([]any)
	if !ok {
		t.Fatalf("hours is not an array: %v", d["hours"])
	}
	hours := make([]map[string]any, len(raw))
	for i, h := range raw {
		hours[i] = h.(map[string]any)
	}
	return hours
}
