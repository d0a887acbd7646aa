//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/smtptest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/worker"
	"github.com/webhookd/webhookd/workflows"
)

// stack is the whole service in one test: API and worker on a real Temporal dev server and a real
// PostgreSQL, delivering to a real HTTPS receiver and alerting through a real SMTP server.
type stack struct {
	db       *model.DB
	dbURL    string
	tc       client.Client
	queue    string
	apiURL   string
	rc       *receiver
	mb       *smtptest.Mailbox
	registry *prometheus.Registry
	starter  *dispatch.Dispatcher
	key      string

	box        *secretbox.Box
	policy     egress.AddressPolicy
	timeout    time.Duration
	logger     *slog.Logger
	stopWorker func()
	metrics    *activities.Metrics
	// egressMetrics: the first worker's egress client registered its metrics in registry (a
	// worker started again reuses none: its client's counts start afresh and go unregistered).
	egressMetrics bool
	opts          stackOptions
}

type stackOptions struct {
	schedule []time.Duration
	timeout  time.Duration
	// retryWindow is how long exhausted deliveries wait for a retry; zero: an hour.
	retryWindow  time.Duration
	allowPrivate bool
	// allowPlaintext permits http:// receivers and the plaintext schemes of brokers
	// (WEBHOOKD_ALLOW_HTTP_TARGETS).
	allowPlaintext bool
	// noWorker leaves the worker out, for tests that start it themselves.
	noWorker bool
	// Receiver isolation and auto-disable; zero values take egress's defaults and never disable.
	hostConcurrency int
	breakerFailures int
	breakerCooldown time.Duration
	disable         notices.DisableRule
	// stopTimeout lets attempts in flight finish when the worker stops.
	stopTimeout time.Duration
	// warnBefore and quiet are the notices' rules beside disable (docs/notifications.md); zero:
	// no warning, no quiet period.
	warnBefore, quiet time.Duration
	// interceptors go on the stack's Temporal client, and so on its workers: a test watches its
	// activities through them.
	interceptors []interceptor.ClientInterceptor
	// proxy, when set, is the egress CONNECT proxy every delivery goes through.
	proxy *url.URL
	// served runs the API's starts and the first attempts as `webhookd serve` does in one process:
	// a request's own starts are eager, and some first attempts may wait briefly for a quick turn
	// (LocalWaits). Without it, every start goes through matching and no first attempt waits.
	served bool
}

var testSecretKey = bytes.Repeat([]byte{9}, 32)

var offlineResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS in tests")
}}

var unsafeQueueChars = regexp.MustCompile(`[^A-Za-z0-9-]`)

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	if o.schedule == nil {
		o.schedule = []time.Duration{time.Second, time.Second}
	}
	if o.timeout == 0 {
		o.timeout = 2 * time.Second
	}
	if o.retryWindow == 0 {
		o.retryWindow = time.Hour
	}
	dbURL := dbtest.PostgresURL(t)
	st := &stack{
		db:       openTestDB(t, dbURL),
		dbURL:    dbURL,
		tc:       temporaltest.Start(t).Client(t, o.interceptors...),
		queue:    "it-" + unsafeQueueChars.ReplaceAllString(t.Name(), "-") + fmt.Sprintf("-%d", time.Now().UnixNano()),
		rc:       startReceiver(t),
		mb:       smtptest.Start(t),
		registry: prometheus.NewRegistry(),
	}
	// Registered before the worker starts, so that it runs after the worker stopped.
	t.Cleanup(func() { st.endWorkflows(t) })
	box, err := secretbox.New(testSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	policy := egress.AddressPolicy{AllowPrivate: o.allowPrivate, AllowHTTP: o.allowPlaintext}
	starts, err := dispatch.NewStartsMetric(st.registry)
	if err != nil {
		t.Fatal(err)
	}
	st.starter = &dispatch.Dispatcher{Client: st.tc, TaskQueue: st.queue,
		Schedule: o.schedule, Jitter: 0.1, RetryWindow: o.retryWindow, AttemptTimeout: o.timeout, Starts: starts, EagerStart: o.served}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("WEBHOOKD_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	st.box, st.policy, st.timeout, st.logger, st.opts = box, policy, o.timeout, logger, o
	if !o.noWorker {
		st.stopWorker = st.startWorker(t, box, policy, o.timeout, logger)
	}
	skips, err := dispatch.NewFilterSkipsMetric(st.registry)
	if err != nil {
		t.Fatal(err)
	}
	uses, err := webhooks.New(webhooks.Config{
		DB: st.db, Dispatcher: st.starter, Secrets: box, Policy: policy, Resolver: offlineResolver,
		Logger: logger, MaxWebhooks: 100, RequestTimeout: 3 * time.Second, FilterSkips: skips, Notices: o.noticeRules(),
		Versions: sources.Versions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sites, err := sources.New(sources.Config{
		DB: st.db, Publisher: uses, Timers: st.starter, SiteBaseURL: "https://sites.example.com",
		RequestTimeout: 3 * time.Second, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	access, err := accounts.New(accounts.Config{DB: st.db})
	if err != nil {
		t.Fatal(err)
	}
	ready, err := readiness.New(st.db, st.tc, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{
		Webhooks: uses, Sources: sites, Accounts: access, Readiness: ready,
		Logger: logger, Registry: st.registry, Gatherer: st.registry, RateLimit: 1000, RateBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	st.apiURL = ts.URL
	st.key, _, err = model.CreateAPIKey(context.Background(), st.db, "owner@example.com", "integration")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openTestDB opens the test's database at dbURL, closed when the test ends, its ids started at a
// base of their own (uniqueIDs).
func openTestDB(t *testing.T, dbURL string) *model.DB {
	t.Helper()
	db, err := model.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	uniqueIDs(t, db)
	return db
}

var idBase atomic.Int64

// uniqueIDs starts each test database's ids at a different base. Every test gets a fresh database
// but shares one Temporal namespace, and workflow ids are made of event and webhook ids: without
// this, two tests would both start delivery:1:1 and the second would be rejected as a duplicate.
func uniqueIDs(t *testing.T, db *model.DB) {
	t.Helper()
	base := (time.Now().UnixNano()/1e6%1e6)*1e6 + idBase.Add(1)*10_000
	for _, table := range []string{"accounts", "webhooks", "events", "deliveries"} {
		if _, err := db.ExecContext(context.Background(), fmt.Sprintf("ALTER TABLE %s ALTER COLUMN id RESTART WITH %d", table, base)); err != nil {
			t.Fatal(err)
		}
	}
}

// stackDeliverySlots is how many first attempts a stack's worker runs at once.
const stackDeliverySlots = 50

// startWorker runs a worker until the test ends or the returned stop is called.
func (st *stack) startWorker(t *testing.T, box *secretbox.Box, policy egress.AddressPolicy, timeout time.Duration, logger *slog.Logger) (stop func()) {
	t.Helper()
	roots, err := egress.RootCAs(st.rc.caFile)
	if err != nil {
		t.Fatal(err)
	}
	o := st.opts
	var reg prometheus.Registerer
	if !st.egressMetrics {
		reg, st.egressMetrics = st.registry, true
	}
	out, err := egress.New(egress.Options{Policy: policy, RootCAs: roots, Timeout: timeout, Registerer: reg,
		HostConcurrency: o.hostConcurrency, BreakerFailures: o.breakerFailures, BreakerCooldown: o.breakerCooldown, Proxy: o.proxy})
	if err != nil {
		t.Fatal(err)
	}
	mailer, err := activities.NewMailer("smtp://"+st.mb.Addr, "webhookd <alerts@example.com>", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.metrics == nil {
		if st.metrics, err = activities.NewMetrics(st.registry); err != nil {
			t.Fatal(err)
		}
	}
	metrics := st.metrics
	acts := &activities.Activities{
		DB: st.db, Secrets: box, Egress: out, Mailer: mailer, Metrics: metrics, Notices: o.noticeRules(),
		Versions: sources.Versions(), UserAgent: "webhookd/test", Log: logger,
		Links:       activities.Links{APIBaseURL: "https://api.example.com", TemporalUIURL: "http://127.0.0.1:8233", TemporalNSpace: "default"},
		SiteBaseURL: "https://sites.example.com",
		Brokers:     activities.NewBrokers(st.db, logger),
	}
	if o.served {
		acts.LocalWaits = activities.LocalWaitsFor(stackDeliverySlots)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{
			Client: st.tc, TaskQueue: st.queue, DB: st.db.DB, Activities: acts, Dispatcher: st.starter,
			Logger: logger, SweepInterval: 500 * time.Millisecond, MaxConcurrentDeliveries: stackDeliverySlots, MaxConcurrentRetries: stackDeliverySlots / 2, StopTimeout: o.stopTimeout,
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
			acts.Brokers.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// call makes a real HTTP request to the API with the variant's credential header.
func (st *stack) call(t *testing.T, variant, method, path string, body any, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, st.apiURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if variant == "A" {
		req.Header.Set("x-api-key", st.key)
	} else {
		req.Header.Set("Authorization", "Bearer "+st.key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out, resp.Header
}

func collection(variant string) string {
	if variant == "A" {
		return "/api/svc/v2"
	}
	return "/v2/svc/v2"
}

// createWebhook registers a webhook and returns its id and secret.
func (st *stack) createWebhook(t *testing.T, variant, url, eventType string) (int64, string) {
	t.Helper()
	status, body, _ := st.call(t, variant, "POST", collection(variant)+"/webhooks", map[string]string{"url": url, "eventType": eventType})
	if status != http.StatusCreated {
		t.Fatalf("create webhook: %d %v", status, body)
	}
	d := body["data"].(map[string]any)
	return int64(d["id"].(float64)), d["secret"].(string)
}

// publish posts an event through the intake endpoint and returns the event id.
func (st *stack) publish(t *testing.T, variant, eventType string, data any, header ...string) int64 {
	t.Helper()
	field := "eventType"
	if variant == "B" {
		field = "event"
	}
	status, body, _ := st.call(t, variant, "POST", collection(variant)+"/events", map[string]any{field: eventType, "data": data}, header...)
	if status != http.StatusAccepted {
		t.Fatalf("publish %s: %d %v", eventType, status, body)
	}
	return int64(body["data"].(map[string]any)["id"].(float64))
}

func (st *stack) webhook(t *testing.T, id int64) model.Webhook {
	t.Helper()
	var w model.Webhook
	if err := st.db.NewSelect().Model(&w).WhereAllWithDeleted().Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func (st *stack) delivery(t *testing.T, eventID, webhookID int64) model.Delivery {
	t.Helper()
	var d model.Delivery
	if err := st.db.NewSelect().Model(&d).Where("event_id = ? AND webhook_id = ?", eventID, webhookID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

func (st *stack) event(t *testing.T, id int64) model.Event {
	t.Helper()
	var e model.Event
	if err := st.db.NewSelect().Model(&e).Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitIdle waits until a delivery workflow has no activity in flight, so a test can assert that
// nothing more will happen without sleeping.
func (st *stack) waitIdle(t *testing.T, eventID, webhookID int64, state string) {
	t.Helper()
	st.waitQuiet(t, eventID, webhookID, state, false)
}

// waitQuiet waits until a delivery workflow is in state with no activity in flight; settled also
// waits until it has no workflow task pending (every signal it got has been handled) and its
// delivery row says state too.
func (st *stack) waitQuiet(t *testing.T, eventID, webhookID int64, state string, settled bool) {
	t.Helper()
	id := workflows.DeliveryWorkflowID(eventID, webhookID)
	what := id + " idle in " + state
	if settled {
		what = id + " settled in " + state
	}
	eventually(t, 30*time.Second, what, func() bool {
		v, err := st.tc.QueryWorkflow(context.Background(), id, "", workflows.QueryState)
		if err != nil {
			return false
		}
		var ds workflows.DeliveryState
		if err := v.Get(&ds); err != nil || ds.State != state {
			return false
		}
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), id, "")
		if err != nil || len(desc.PendingActivities) != 0 {
			return false
		}
		return !settled || (desc.PendingWorkflowTask == nil && st.delivery(t, eventID, webhookID).State == state)
	})
}

// endWorkflows terminates the workflows this stack left running on the Temporal server that the
// package's tests share (held backlogs, retry timers, exhausted deliveries waiting for a retry):
// with its worker gone their timers and timeouts still keep the server busy, and the CPU
// measurements of the tests after this one (TestSharedHostIsolationUnderCPUPressure counts the
// server's CPU) would pay for them.
func (st *stack) endWorkflows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	query := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", st.queue)
	ended := 0
	defer func() {
		if ended > 0 {
			t.Logf("terminated the %d workflows the test left running", ended)
		}
	}()
	for range 20 { // visibility lags a little behind the terminations: list again until none
		resp, err := st.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000})
		if err != nil {
			t.Logf("end the stack's workflows: %v", err)
			return
		}
		if len(resp.Executions) == 0 {
			return
		}
		ended += len(resp.Executions)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, e := range resp.Executions {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				_ = st.tc.TerminateWorkflow(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), "the test is over")
			}()
		}
		wg.Wait()
		time.Sleep(200 * time.Millisecond)
	}
}

// noticeRules are the stack's rules of notices, the same for its worker and its use cases.
func (o stackOptions) noticeRules() notices.Rules {
	return notices.Rules{Disable: o.disable, WarnBefore: o.warnBefore, Quiet: o.quiet}
}
