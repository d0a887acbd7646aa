package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

func TestRateLimit(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			// One token per thousand seconds: after the burst every request is refused, however slow
			// the machine, so the test does not depend on timing.
			e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.RateLimit, c.RateBurst = 0.001, 3 })
			limited := v.auth(newKey(t, e.db))
			for i := 0; i < 3; i++ {
				e.do(t, "GET", v.collection, limited, "").expect(t, 200, "")
			}
			r := e.do(t, "GET", v.collection, limited, "")
			r.expect(t, http.StatusTooManyRequests, "rate_limited")
			v.errEnvelope(t, r)
			if r.header.Get("Retry-After") != "1000" {
				t.Fatalf("Retry-After = %q, want 1000", r.header.Get("Retry-After"))
			}
			// The limit is per key: another key is not affected.
			e.do(t, "GET", v.collection, v.auth(newKey(t, e.db)), "").expect(t, 200, "")
		})
	}
}

// TestInternalErrorIsNotShown: a webhook whose stored secret cannot be decrypted (a wrong server
// key) is a defect on our side: 500, a generic message, the request id, and no internal text.
func TestInternalErrorIsNotShown(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		id := e.do(t, "POST", v.collection, auth, createBody("https://x.example.com/", v.eventType)).data(t)["id"]
		if _, err := e.db.NewUpdate().Table("webhooks").Set("secret = ?", "v1:AAAA").Where("id = ?", id).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := e.do(t, "GET", v.collection+"/"+jsonNumber(id)+"/secret", auth, "")
		r.expect(t, http.StatusInternalServerError, "internal_error")
		v.errEnvelope(t, r)
		if r.body["message"] != "internal error" || strings.Contains(string(r.raw), "sealed") {
			t.Fatalf("500 body = %s", r.raw)
		}
	})
}

func TestOpenAPIAndMetricsServed(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Registry, c.Gatherer = reg, reg })
	r := e.do(t, "GET", "/openapi.yaml", nil, "")
	if r.status != 200 || !strings.Contains(string(r.raw), "openapi: 3") {
		t.Fatalf("openapi.yaml = %d", r.status)
	}
	e.do(t, "GET", "/healthz", nil, "")
	m := e.do(t, "GET", "/metrics", nil, "")
	if m.status != 200 || !strings.Contains(string(m.raw), `webhookd_http_requests_total{code="200",method="GET",route="/healthz"} 1`) {
		t.Fatalf("metrics = %d %s", m.status, m.raw)
	}
	// The env's Temporal client points at a closed port; the database answers.
	for _, want := range []string{`webhookd_dependency_up{dependency="database"} 1`, `webhookd_dependency_up{dependency="temporal"} 0`} {
		if !strings.Contains(string(m.raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestRequestIDIsKeptOrMade(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	r := e.do(t, "GET", "/healthz", func(r *http.Request) { r.Header.Set("X-Request-Id", "trace-123") }, "")
	if r.header.Get("X-Request-Id") != "trace-123" {
		t.Fatalf("request id = %q, want the client's", r.header.Get("X-Request-Id"))
	}
	r = e.do(t, "GET", "/healthz", func(r *http.Request) { r.Header.Set("X-Request-Id", "bad\nid") }, "")
	if id := r.header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Fatalf("unsafe client request id kept: %q", id)
	}
}

func jsonNumber(v any) string {
	return fmt.Sprintf("%.0f", v.(float64))
}

// TestWrongMethodIs405: a path that exists with other methods answers 405 with Allow, in the
// variant's envelope; a path that does not exist stays 404.
func TestWrongMethodIs405(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Registry, c.Gatherer = reg, reg })
	for _, tc := range []struct {
		method, path string
		status       int
		allow        []string
	}{
		{"POST", "/api/svc/v2/webhooks/1", 405, []string{"GET", "PUT", "PATCH", "DELETE"}},
		{"DELETE", "/v2/svc/v2/webhooks", 405, []string{"GET", "POST"}},
		{"PUT", "/v2/svc/v2/events", 405, []string{"GET", "POST"}},
		{"PUT", "/api/svc/v2/campaigns/7", 405, []string{"GET", "PATCH"}},
		{"GET", "/v2/svc/v2/websites/7/archive", 405, []string{"POST"}},
		{"POST", "/healthz", 405, []string{"GET"}},
		{"POST", "/readyz", 405, []string{"GET"}},
		{"POST", "/metrics", 405, []string{"GET"}},
		{"POST", "/openapi.yaml", 405, []string{"GET"}},
		{"POST", "/openapi-webhooks.yaml", 405, []string{"GET"}},
		{"DELETE", "/schemas/events/campaign.created/v1.json", 405, []string{"GET"}},
		{"GET", "/api/svc/v2/nothing-here", 404, nil},
	} {
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.status {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, rec.Code, rec.Body, tc.status)
			continue
		}
		if tc.status == http.StatusMethodNotAllowed {
			// Every 405 as the document describes it: the envelope, and an Allow listing every method
			// the path takes.
			e.oa.Check(t, httptest.NewRequest(tc.method, tc.path, nil), rec.Code, rec.Header(), rec.Body.Bytes())
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s %s: %v: %s", tc.method, tc.path, err, rec.Body)
		}
		if strings.HasPrefix(tc.path, "/api/") && body["success"] != false || strings.HasPrefix(tc.path, "/v2/") && body["isError"] != true {
			t.Errorf("%s %s: body %s is not the variant's error envelope", tc.method, tc.path, rec.Body)
		}
		for _, m := range tc.allow {
			if !strings.Contains(rec.Header().Get("Allow"), m) {
				t.Errorf("%s %s: Allow = %q, want it to list %s", tc.method, tc.path, rec.Header().Get("Allow"), m)
			}
		}
	}
}

// TestNewRefusesMissingLimits: the limits have their defaults in cmd/webhookd's Config only; a
// Config without one, or without the use cases, is refused, naming it, rather than refusing every
// request. (The webhook limit is the use cases' own: webhooks.TestNewRefusesMissingLimits.)
func TestNewRefusesMissingLimits(t *testing.T) {
	db := dbtest.SQLite(t)
	box, err := secretbox.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := webhooks.New(webhooks.Config{DB: db, Secrets: box, MaxWebhooks: 100, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sites, err := sources.New(sources.Config{DB: db, Publisher: svc, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	access, err := accounts.New(accounts.Config{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	ready, err := readiness.New(db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		clear func(*api.Config)
	}{
		{"Webhooks", func(c *api.Config) { c.Webhooks = nil }},
		{"Sources", func(c *api.Config) { c.Sources = nil }},
		{"Accounts", func(c *api.Config) { c.Accounts = nil }},
		{"Readiness", func(c *api.Config) { c.Readiness = nil }},
		{"RateLimit", func(c *api.Config) { c.RateLimit = 0 }},
		{"RateBurst", func(c *api.Config) { c.RateBurst = 0 }},
	} {
		cfg := api.Config{Webhooks: svc, Sources: sites, Accounts: access, Readiness: ready, RateLimit: 20, RateBurst: 40}
		c.clear(&cfg)
		if _, err := api.New(cfg); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("without %s: New returned %v, want an error naming it", c.field, err)
		}
	}
	if _, err := api.New(api.Config{Webhooks: svc, Sources: sites, Accounts: access, Readiness: ready, RateLimit: 20, RateBurst: 40}); err != nil {
		t.Fatalf("with every limit: %v", err)
	}
}
