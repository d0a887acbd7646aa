package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/docs/openapitest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

func TestMain(m *testing.M) { dbtest.Main(everyOperation{m}, temporaltest.Stop) }

// everyOperation runs the tests and then, in the integration tier (where retries and recoveries
// reach Temporal), when the whole package ran (no -run, -skip or -short) and passed, fails the run unless its exchanges showed every operation of docs/openapi.yaml
// both accepted (its request validated too) and refused, each answer as documented: the API tier's
// run over every operation, both variants, success and error cases (issue 32).
type everyOperation struct{ m *testing.M }

func (e everyOperation) Run() int {
	code := e.m.Run()
	if code != 0 || !integrationTier || flag.Lookup("test.run").Value.String() != "" || flag.Lookup("test.skip").Value.String() != "" || testing.Short() {
		return code
	}
	if missing := openapitest.Unexercised(); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: no exchange of the api tests showed these operations of docs/openapi.yaml:\n  %s\n", strings.Join(missing, "\n  "))
		return 1
	}
	return 0
}

// testKey is a fixed server key: tests need to decrypt nothing by hand, only to prove the plain
// secret never reaches the database.
var testKey = bytes.Repeat([]byte{7}, 32)

type testEnv struct {
	db  *model.DB
	srv *api.Server
	oa  *openapitest.Validator
	// uses is the server's use cases, for a test that serves another surface (the portal) over them.
	uses *webhooks.Service
	// access and ready are the server's accounts and readiness, for the same surface.
	access *accounts.Service
	ready  *readiness.Checker
	// clock is the use cases' time when the env was built withClock; nil: the real one.
	clock *testClock
}

// envConfig is the API's Config with what tests give the use cases, which they set as options too.
type envConfig struct {
	api.Config
	// Dispatcher starts deliveries and websites' publication timers; nil leaves starts to a
	// sweeper and refuses schedules.
	Dispatcher  *dispatch.Dispatcher
	MaxWebhooks int64
	Disable     notices.DisableRule
	TrialTime   time.Duration
	// Temporal is what readiness asks; PortalOff turns the portal's links off.
	Temporal  client.Client
	PortalOff bool
	// Clock, when set, is the use cases' time (withClock).
	Clock *testClock
}

type serverOption func(*envConfig)

// withClock gives the use cases a clock the test moves by hand, so that two stamps differ because
// the test says so, not because it slept.
func withClock(c *envConfig) { c.Clock = &testClock{now: model.Now()} }

// testClock starts at the real time and stands still until Advance.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newEnv(t testing.TB, db *model.DB, opts ...serverOption) *testEnv {
	t.Helper()
	box, err := secretbox.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on port 1: readiness must report Temporal unavailable, not hang.
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	cfg := envConfig{Config: api.Config{
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		RateLimit: 1000, RateBurst: 1000,
	}, MaxWebhooks: 100, Temporal: tc}
	for _, o := range opts {
		o(&cfg)
	}
	wc := webhookstest.Config{Dispatcher: cfg.Dispatcher, MaxWebhooks: cfg.MaxWebhooks, Disable: cfg.Disable, TrialTime: cfg.TrialTime}
	if cfg.Clock != nil {
		wc.Clock = cfg.Clock.Now
	}
	cfg.Webhooks = webhookstest.New(t, db, box, cfg.Logger, wc)
	sc := sources.Config{DB: db, Publisher: cfg.Webhooks, SiteBaseURL: "https://sites.example.com",
		RequestTimeout: cfg.Webhooks.RequestTimeout(), Logger: cfg.Logger}
	if cfg.Dispatcher != nil {
		sc.Timers = cfg.Dispatcher
	}
	if cfg.Sources, err = sources.New(sc); err != nil {
		t.Fatal(err)
	}
	if cfg.Accounts, err = accounts.New(accounts.Config{DB: db, PublicURL: cfg.PublicURL, PortalOff: cfg.PortalOff}); err != nil {
		t.Fatal(err)
	}
	if cfg.Readiness, err = readiness.New(db, cfg.Temporal, cfg.Logger); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{db: db, srv: srv, oa: openapitest.New(t), uses: cfg.Webhooks, access: cfg.Accounts, ready: cfg.Readiness, clock: cfg.Clock}
}

// response is one recorded exchange, already checked against the OpenAPI document.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (e *testEnv) do(t *testing.T, method, path string, auth func(*http.Request), body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != nil {
		auth(req)
	}
	return e.serve(t, req)
}

// serve sends a request built by the caller (one with a chunked body, say) and checks the answer
// as do does.
func (e *testEnv) serve(t *testing.T, req *http.Request) response {
	t.Helper()
	method, path := req.Method, req.RequestURI // the target as httptest.NewRequest was given it
	// The request body is kept for the document's check: a request the service accepts must be
	// one the document accepts.
	var sent []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatalf("%s %s: read the request body: %v", method, path, err)
		}
		sent = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	res := response{status: rec.Code, header: rec.Header(), raw: rec.Body.Bytes()}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id", method, path)
	}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(res.raw, &res.body); err != nil {
			t.Fatalf("%s %s: response is not a JSON object: %v: %s", method, path, err, res.raw)
		}
	}
	check := httptest.NewRequest(method, path, bytes.NewReader(sent))
	check.Header = req.Header.Clone()
	e.oa.Check(t, check, rec.Code, rec.Header(), res.raw)
	return res
}

func (r response) data(t *testing.T) map[string]any {
	t.Helper()
	d, ok := r.body["data"].(map[string]any)
	if !ok {
		t.Fatalf("data is not an object: %s", r.raw)
	}
	return d
}

func (r response) list(t *testing.T) []any {
	t.Helper()
	d, ok := r.body["data"].([]any)
	if !ok {
		t.Fatalf("data is not an array: %s", r.raw)
	}
	return d
}

func (r response) expect(t *testing.T, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d: %s", r.status, status, r.raw)
	}
	if code != "" && r.body["code"] != code {
		t.Fatalf("code = %v, want %s: %s", r.body["code"], code, r.raw)
	}
}

// expectError checks an error response: status, the variant's error envelope, and, when field is
// given, the field it names.
func (r response) expectError(t *testing.T, v variantCase, status int, field string) {
	t.Helper()
	r.expect(t, status, "")
	v.errEnvelope(t, r)
	if field != "" && r.body["field"] != field {
		t.Fatalf("field = %v, want %s: %s", r.body["field"], field, r.raw)
	}
}

// variantCase is one row of DESIGN.md's variant table, seen from a client.
type variantCase struct {
	name       string
	collection string
	eventType  string
	// foreignEventType belongs to the other variant and must be refused here.
	foreignEventType string
	initialStatus    string
	auth             func(key string) func(*http.Request)
	// wrongAuth presents the key in the other variant's header.
	wrongAuth func(key string) func(*http.Request)
	// okEnvelope and errEnvelope check the variant's envelope shape.
	okEnvelope  func(t *testing.T, r response)
	errEnvelope func(t *testing.T, r response)
}

func header(name, prefix string) func(string) func(*http.Request) {
	return func(key string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set(name, prefix+key) }
	}
}

var variants = []variantCase{
	{
		name: "A", collection: "/api/svc/v2/webhooks", eventType: "campaign.created", foreignEventType: "lead.captured",
		initialStatus: "pending", auth: header("x-api-key", ""), wrongAuth: header("Authorization", "Bearer "),
		okEnvelope: func(t *testing.T, r response) {
			t.Helper()
			if r.body["success"] != true {
				t.Fatalf("success = %v: %s", r.body["success"], r.raw)
			}
			if _, ok := r.body["isError"]; ok {
				t.Fatalf("variant A envelope carries isError: %s", r.raw)
			}
		},
		errEnvelope: func(t *testing.T, r response) {
			t.Helper()
			if r.body["success"] != false || r.body["message"] == "" || r.body["code"] == nil {
				t.Fatalf("variant A error envelope wrong: %s", r.raw)
			}
		},
	},
	{
		name: "B", collection: "/v2/svc/v2/webhooks", eventType: "lead.captured", foreignEventType: "campaign.created",
		initialStatus: "active", auth: header("Authorization", "Bearer "), wrongAuth: header("x-api-key", ""),
		okEnvelope: func(t *testing.T, r response) {
			t.Helper()
			if r.body["isError"] != false {
				t.Fatalf("isError = %v: %s", r.body["isError"], r.raw)
			}
			if _, ok := r.body["message"].(string); !ok {
				t.Fatalf("message missing: %s", r.raw)
			}
			if _, ok := r.body["data"]; !ok {
				t.Fatalf("data missing: %s", r.raw)
			}
		},
		errEnvelope: func(t *testing.T, r response) {
			t.Helper()
			if r.body["isError"] != true || r.body["data"] != nil || r.body["message"] == "" || r.body["code"] == nil {
				t.Fatalf("variant B error envelope wrong: %s", r.raw)
			}
			if _, ok := r.body["data"]; !ok {
				t.Fatalf("variant B error envelope lacks data:null: %s", r.raw)
			}
		},
	},
}

// forEach runs fn for every backend and variant, each backend with a fresh database.
func forEach(t *testing.T, fn func(t *testing.T, e *testEnv, v variantCase), opts ...serverOption) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), opts...)
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) { fn(t, e, v) })
			}
		})
	}
}

var accountSeq atomic.Int64

func newKey(t testing.TB, db *model.DB) string {
	t.Helper()
	key, _, err := model.CreateAPIKey(context.Background(), db, fmt.Sprintf("owner%d-%s@example.com", accountSeq.Add(1), strings.ReplaceAll(t.Name(), "/", "-")), "test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func createBody(url, eventType string) string {
	b, _ := json.Marshal(map[string]string{"url": url, "eventType": eventType})
	return string(b)
}
