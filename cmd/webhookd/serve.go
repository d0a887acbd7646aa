package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/portal"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/tracing"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/worker"
)

// withPortal serves the owner's portal under portal.Prefix and everything else from the API.
// Without it (WEBHOOKD_PORTAL=false) the API gets /portal/ too, and answers 404.
func withPortal(api, p http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(portal.Prefix, "/") {
			http.Redirect(w, r, portal.Prefix, http.StatusMovedPermanently)
			return
		}
		if strings.HasPrefix(r.URL.Path, portal.Prefix) {
			p.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// serveGCPercent is the garbage collector's target that serve sets unless GOGC is: the heap may
// grow to three times what is live before a collection rather than twice. webhookd's live heap is
// small (12 MB under load), and at Go's default it collected three times a second under load,
// 6% of its CPU per delivery in a profile (docs/performance-history.md).
const serveGCPercent = 200

// serve runs the API, the worker, or both until ctx ends, then shuts down gracefully, in the
// order of shutdown's stages.
func serve(ctx context.Context, cfg Config, role string, logger *slog.Logger) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	var down shutdown
	defer down.run()
	ctx, cancel := context.WithCancel(ctx)
	down.at(endRun, cancel)

	p, err := newServeParts(ctx, cfg, role, logger, &down)
	if err != nil {
		return err
	}
	errc := make(chan error, 3)
	handler, err := newHandler(cfg, role, p)
	if err != nil {
		return err
	}
	go func() {
		if err := checkNamespace(ctx, p.temporal, cfg.Temporal.Namespace, logger); err != nil {
			errc <- err
		}
	}()
	if err := startHTTP(cfg, role, handler, logger, errc, &down); err != nil {
		return err
	}
	if err := startDebug(cfg, logger, &down); err != nil {
		return err
	}
	if role == "worker" || role == "all" {
		if err := startWorker(ctx, cfg, p, errc, &down); err != nil {
			return err
		}
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-errc:
		logger.Error("stopping after failure", "err", err)
		return err
	}
}

// serveParts are what the API and the worker share.
type serveParts struct {
	db       *model.DB
	secrets  *secretbox.Box
	registry *prometheus.Registry
	// filterSkips counts the webhooks payload filters kept an event from, wherever it is accepted.
	filterSkips *prometheus.CounterVec
	tracer      trace.Tracer // nil: tracing off
	temporal    client.Client
	dispatcher  *dispatch.Dispatcher
	policy      egress.AddressPolicy
	logger      *slog.Logger

	// filterOverruns counts the webhooks an event reached unjudged, their payload filter out of
	// its budget, wherever it is accepted.
	filterOverruns *prometheus.CounterVec
}

// newServeParts builds the shared parts, each ended at its stage of down.
func newServeParts(ctx context.Context, cfg Config, role string, logger *slog.Logger, down *shutdown) (serveParts, error) {
	p := serveParts{logger: logger, policy: egress.AddressPolicy{AllowPrivate: cfg.AllowPrivateTargets, AllowHTTP: cfg.AllowHTTPTargets}}
	var err error
	if p.secrets, p.db, err = openStores(ctx, cfg, down); err != nil {
		return p, err
	}
	if p.registry, err = newRegistry(); err != nil {
		return p, err
	}
	if p.filterSkips, err = dispatch.NewFilterSkipsMetric(p.registry); err != nil {
		return p, err
	}
	if p.filterOverruns, err = dispatch.NewFilterOverrunsMetric(p.registry); err != nil {
		return p, err
	}
	tr, err := startTracing(ctx, cfg, logger, down)
	if err != nil {
		return p, err
	}
	if tr != nil {
		p.tracer = tr.Tracer()
	}
	if p.temporal, err = newTemporalClient(cfg, tr, p.registry, logger, down); err != nil {
		return p, err
	}
	p.dispatcher, err = newServeDispatcher(cfg, role, p.temporal, p.db.DB, p.registry, logger, down)
	return p, err
}

// openStores opens the secret box and the database, closed last.
func openStores(ctx context.Context, cfg Config, down *shutdown) (*secretbox.Box, *model.DB, error) {
	secrets, err := openSecrets(cfg)
	if err != nil {
		return nil, nil, err
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	down.at(closeDB, func() { _ = db.Close() })
	return secrets, db, nil
}

// openSecrets is the secret box of WEBHOOKD_SECRET_KEY (or of the dev key in the data directory).
func openSecrets(cfg Config) (*secretbox.Box, error) {
	key, err := cfg.secretKey()
	if err != nil {
		return nil, err
	}
	secrets, err := secretbox.New(key)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOKD_SECRET_KEY: %w", err)
	}
	return secrets, nil
}

// newRegistry is the process's metrics registry, with the Go runtime's and the process's.
func newRegistry() (*prometheus.Registry, error) {
	registry := prometheus.NewRegistry()
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	return registry, nil
}

// newServeDispatcher is serve's Dispatcher: its starts counted, a request's starts eager where
// the worker shares the process, their marks written behind the answer and flushed at the stop.
func newServeDispatcher(cfg Config, role string, tc client.Client, db *bun.DB, registry prometheus.Registerer, logger *slog.Logger,
	down *shutdown) (*dispatch.Dispatcher, error) {
	starts, err := dispatch.NewStartsMetric(registry)
	if err != nil {
		return nil, err
	}
	// A request's starts are recorded behind its answer, many per write (dispatch.Marks).
	marks := &dispatch.Marks{DB: db, Log: logger, Linger: dispatch.MarkLinger}
	down.at(flushMarks, marks.Wait)
	return newDispatcher(cfg, tc, dispatchServing{
		// The API and the worker share this process and its client: the first task of a workflow
		// a request starts goes straight to the worker (Dispatcher.EagerStart says which starts).
		eager: role == "all", starts: starts, marks: marks,
	}), nil
}

// startTracing starts the tracer provider, flushed at its stage of down. Off (the default), it is
// nil, and nothing installs a span, a middleware or an interceptor.
func startTracing(ctx context.Context, cfg Config, logger *slog.Logger, down *shutdown) (*tracing.Tracing, error) {
	tr, err := tracing.Start(ctx, cfg.Tracing, version, logger.With("component", "tracing"))
	if err != nil || tr == nil {
		return nil, err
	}
	down.at(flushTraces, func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(flushCtx); err != nil {
			logger.Warn("tracing: spans not exported at exit", "err", err)
		}
	})
	logger.Info("tracing on: spans exported over OTLP", "protocol", cfg.Tracing.Protocol)
	return tr, nil
}

// newTemporalClient is the process's one Temporal client, lazy so that the API comes up (and
// reports not-ready) while Temporal is still starting.
func newTemporalClient(cfg Config, tr *tracing.Tracing, registry *prometheus.Registry, logger *slog.Logger, down *shutdown) (client.Client, error) {
	topts := cfg.Temporal
	if tr != nil {
		// On the client, the interceptor serves this process's workers too.
		ti, err := tr.TemporalInterceptor()
		if err != nil {
			//lint:ignore ST1005 Temporal is a name
			return nil, fmt.Errorf("Temporal tracing interceptor: %w", err)
		}
		topts.Interceptors = append(slices.Clone(topts.Interceptors), ti)
	}
	topts.Logger = temporallog.NewStructuredLogger(logger.With("component", "temporal"))
	var err error
	if topts.MetricsHandler, err = worker.NewMetricsHandler(registry, logger.With("component", "temporal")); err != nil {
		return nil, err
	}
	tc, err := client.NewLazyClient(topts)
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
		return nil, fmt.Errorf("Temporal client: %w", err)
	}
	down.at(closeTemporal, tc.Close)
	return tc, nil
}

// serveUseCases are the webhooks' use cases that the API and the portal serve, with sources' table
// of event versions (docs/events.md, "Versions").
func serveUseCases(cfg Config, p serveParts) (*webhooks.Service, error) {
	return webhooks.New(webhooks.Config{
		DB: p.db, Dispatcher: p.dispatcher, Secrets: p.secrets, Policy: p.policy,
		Logger: p.logger.With("component", "webhooks"), MaxWebhooks: cfg.MaxWebhooks, RequestTimeout: cfg.TemporalRequestTimeout,
		FilterSkips: p.filterSkips, FilterOverruns: p.filterOverruns, Notices: cfg.noticeRules(),
		Versions: sources.Versions(),
	})
}

// newHandler is what WEBHOOKD_HTTP_ADDR serves: the API (and the portal), or for a worker alone
// its health checks and scrapes.
func newHandler(cfg Config, role string, p serveParts) (http.Handler, error) {
	if role == "worker" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		})
		return mux, nil
	}
	uses, err := serveUseCases(cfg, p)
	if err != nil {
		return nil, err
	}
	sites, err := sources.New(sources.Config{
		DB: p.db, Publisher: uses, Timers: p.dispatcher, SiteBaseURL: cfg.SiteBaseURL,
		RequestTimeout: cfg.TemporalRequestTimeout, Logger: p.logger.With("component", "sources"),
	})
	if err != nil {
		return nil, err
	}
	access, err := newAccounts(cfg, p.db)
	if err != nil {
		return nil, err
	}
	ready, err := readiness.New(p.db, p.temporal, p.logger.With("component", "readiness"))
	if err != nil {
		return nil, err
	}
	srv, err := api.New(api.Config{
		Webhooks: uses, Sources: sites, Accounts: access, Readiness: ready,
		Logger:   p.logger.With("component", "api"),
		Registry: p.registry, Gatherer: p.registry,
		RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst,
		PublicURL: cfg.PublicURL, Tracer: p.tracer,
	})
	if err != nil || !cfg.Portal {
		return srv, err
	}
	portalSrv, err := portal.New(portal.Config{
		Webhooks: uses, Accounts: access, Readiness: ready,
		Logger: p.logger.With("component", "portal"), PublicURL: cfg.PublicURL, FrameAncestors: cfg.PortalFrameAncestors,
		RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, Registry: p.registry,
		Tracer: p.tracer,
	})
	if err != nil {
		return nil, err
	}
	return withPortal(srv, portalSrv), nil
}

// startHTTP serves handler on WEBHOOKD_HTTP_ADDR until its stage of down, which lets the requests
// in flight finish.
func startHTTP(cfg Config, role string, handler http.Handler, logger *slog.Logger, errc chan<- error, down *shutdown) error {
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("WEBHOOKD_HTTP_ADDR: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	logger.Info("http listening", "addr", ln.Addr().String(), "role", role)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	down.at(stopHTTP, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("http shutdown", "err", err)
		}
	})
	return nil
}

// startDebug serves profiles for measuring (docs/performance.md) on WEBHOOKD_DEBUG_ADDR, a
// listener of their own so the API's port never exposes them; unset, nothing.
func startDebug(cfg Config, logger *slog.Logger, down *shutdown) error {
	if cfg.DebugAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.DebugAddr)
	if err != nil {
		return fmt.Errorf("WEBHOOKD_DEBUG_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("pprof listening", "addr", ln.Addr().String())
	go func() { _ = srv.Serve(ln) }()
	down.at(stopDebug, func() { _ = srv.Close() })
	return nil
}

// startWorker runs the worker until ctx ends; its stage of down waits for it to stop.
func startWorker(ctx context.Context, cfg Config, p serveParts, errc chan<- error, down *shutdown) error {
	// Set before the first worker exists (the SDK's cache is per process). Deliveries waiting on
	// retry timers would otherwise stay cached, 10,000 by default: hundreds of MB.
	sdkworker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
	acts, err := newActivities(cfg, p)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go acts.Brokers.Run(ctx)
	go func() {
		defer close(done)
		if err := worker.Run(ctx, workerConfig(cfg, p.temporal, p.db.DB, acts, p.dispatcher, p.logger)); err != nil {
			errc <- err
		}
	}()
	down.at(stopWorker, func() { <-done })
	return nil
}

// dispatchServing are the parts of a Dispatcher that only serve's has (Dispatcher's fields of the
// same names); the operator commands' dispatcher has none.
type dispatchServing struct {
	eager  bool
	starts *prometheus.CounterVec
	marks  *dispatch.Marks
}

// newDispatcher is the Dispatcher of cfg's task queues and delivery settings: serve's, and the operator
// commands' (webhookd webhooks retry|recover), so a delivery they start runs as serve's would.
func newDispatcher(cfg Config, tc client.Client, serving dispatchServing) *dispatch.Dispatcher {
	return &dispatch.Dispatcher{
		Client: tc, TaskQueue: cfg.TaskQueue,
		Schedule: cfg.RetrySchedule, Jitter: cfg.RetryJitter, RetryWindow: cfg.RetryWindow, AttemptTimeout: cfg.DeliveryTimeout,
		EagerStart: serving.eager, Starts: serving.starts, Marks: serving.marks,
	}
}

// workerConfig is the worker's part of cfg, around the parts serve built.
func workerConfig(cfg Config, tc client.Client, db *bun.DB, acts *activities.Activities, d *dispatch.Dispatcher, logger *slog.Logger) worker.Config {
	return worker.Config{
		Client: tc, TaskQueue: cfg.TaskQueue, DB: db, Activities: acts, Dispatcher: d,
		Logger: logger.With("component", "worker"), SweepInterval: cfg.SweepInterval,
		MaxConcurrentDeliveries: cfg.MaxConcurrentDeliveries, MaxConcurrentRetries: cfg.MaxConcurrentRetries,
		// An attempt in flight at a deploy finishes: its exchange, plus recording it.
		StopTimeout: activities.AttemptBudget{Timeout: cfg.DeliveryTimeout}.StopTimeout(),
		Retention:   worker.Retention{Keep: cfg.Retention},
	}
}

// newActivities builds the delivery worker's dependencies: the one shared delivery client, the
// mailer and the delivery metrics, and sources' table of event versions (docs/events.md,
// "Versions"). Both clients trust the same roots, read once.
func newActivities(cfg Config, p serveParts) (*activities.Activities, error) {
	db, secrets, policy, reg, tracer, logger := p.db, p.secrets, p.policy, p.registry, p.tracer, p.logger
	roots, err := egress.RootCAs(cfg.ExtraCAFile)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOKD_EXTRA_CA_FILE: %w", err)
	}
	proxy, err := cfg.EgressProxy.URL()
	if err != nil {
		return nil, fmt.Errorf("WEBHOOKD_EGRESS_PROXY: %w", err)
	}
	if proxy != nil {
		logger.Info("deliveries go through the egress proxy", "proxy", cfg.EgressProxy.String())
	}
	out, err := egress.New(egress.Options{
		Policy: policy, RootCAs: roots, Timeout: cfg.DeliveryTimeout, Proxy: proxy,
		HostConcurrency: cfg.HostConcurrency, EndpointConcurrency: cfg.EndpointConcurrency,
		BreakerFailures: cfg.BreakerFailures, BreakerCooldown: cfg.BreakerCooldown, Registerer: reg, Logger: logger.With("component", "egress"),
	})
	if err != nil {
		return nil, err
	}
	// Token requests of webhooks' OAuth2 authentication obey the receivers' address rules.
	tokenClient, err := egress.NewTokenClient(policy, roots, proxy, nil)
	if err != nil {
		return nil, err
	}
	mailer, err := activities.NewMailer(cfg.SMTPURL, cfg.MailFrom, filepath.Join(cfg.DataDir, "mail"), roots)
	if err != nil {
		return nil, err
	}
	if cfg.SMTPURL == "" {
		logger.Info("no WEBHOOKD_SMTP_URL: alert e-mails are written to " + filepath.Join(cfg.DataDir, "mail"))
	}
	metrics, err := activities.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &activities.Activities{
		DB: db, Secrets: secrets, Egress: out, Tokens: activities.NewTokens(tokenClient), Mailer: mailer,
		Brokers: activities.NewBrokers(db, logger.With("component", "brokers")),
		Metrics: metrics, FilterSkips: p.filterSkips, FilterOverruns: p.filterOverruns, Tracer: tracer, UserAgent: "webhookd/" + version, Log: logger.With("component", "activities"),
		Links:       activities.Links{APIBaseURL: cfg.PublicURL, TemporalUIURL: cfg.TemporalUIURL, TemporalNSpace: cfg.Temporal.Namespace},
		SiteBaseURL: cfg.SiteBaseURL,
		Notices:     cfg.noticeRules(),
		Versions:    sources.Versions(),
		LocalWaits:  activities.LocalWaitsFor(cfg.MaxConcurrentDeliveries),
	}, nil
}

// checkNamespace stops webhookd when the namespace lacks its search attributes, which would make
// every delivery workflow's start fail. It waits for Temporal to be reachable, as the lazy client
// does; a namespace it may not inspect (an API key without operator rights) is only logged.
func checkNamespace(ctx context.Context, tc client.Client, namespace string, logger *slog.Logger) error {
	for waited := false; ; waited = true {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := dispatch.CheckSearchAttributes(callCtx, tc, namespace)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, dispatch.ErrSearchAttributesMissing):
			return err
		case ctx.Err() != nil:
			return nil
		case !dispatch.CheckUnavailable(err):
			logger.Warn("cannot check the namespace's search attributes; assuming they exist", "namespace", namespace, "err", err)
			return nil
		case !waited:
			logger.Info("waiting for Temporal to check the namespace", "namespace", namespace, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// disableRule is the auto-disable rule of cfg: the worker applies it when a delivery is exhausted,
