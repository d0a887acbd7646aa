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
	"github.com/webhookd/webhookd/tracing"
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
// 6% of its CPU per delivery in a profile (docs/performance.md).
const serveGCPercent = 200

// serve runs the API, the worker, or both until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg Config, role string, logger *slog.Logger) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
	key, err := cfg.secretKey()
	if err != nil {
		return err
	}
	secrets, err := model.NewSecretBox(key)
	if err != nil {
		return fmt.Errorf("WEBHOOKD_SECRET_KEY: %w", err)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	registry := prometheus.NewRegistry()
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}

	// Off (the default), tr and tracer are nil and nothing below installs a span, a middleware or
	// an interceptor.
	tr, err := tracing.Start(ctx, cfg.Tracing, version, logger.With("component", "tracing"))
	if err != nil {
		return err
	}
	var tracer trace.Tracer
	if tr != nil {
		// Deferred before the client's Close, so it runs once the worker and the API have stopped
		// and the client is closed: the spans of the last attempts are exported too.
		defer func() {
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.Shutdown(flushCtx); err != nil {
				logger.Warn("tracing: spans not exported at exit", "err", err)
			}
		}()
		tracer = tr.Tracer()
		logger.Info("tracing on: spans exported over OTLP", "protocol", cfg.Tracing.Protocol)
	}

	// A lazy client lets the API come up (and report not-ready) while Temporal is still starting.
	topts := cfg.Temporal
	if tr != nil {
		// On the client, the interceptor serves this process's workers too.
		ti, err := tr.TemporalInterceptor()
		if err != nil {
			//lint:ignore ST1005 Temporal is a name
			return fmt.Errorf("Temporal tracing interceptor: %w", err)
		}
		topts.Interceptors = append(slices.Clone(topts.Interceptors), ti)
	}
	topts.Logger = temporallog.NewStructuredLogger(logger.With("component", "temporal"))
	if topts.MetricsHandler, err = worker.NewMetricsHandler(registry, logger.With("component", "temporal")); err != nil {
		return err
	}
	tc, err := client.NewLazyClient(topts)
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
		return fmt.Errorf("Temporal client: %w", err)
	}
	defer tc.Close()
	starts, err := dispatch.NewStartsMetric(registry)
	if err != nil {
		return err
	}
	dispatcher := newDispatcher(cfg, tc)
	dispatcher.Starts = starts
	// The API and the worker share this process and its client: the first task of a workflow a
	// request starts goes straight to the worker (Dispatcher.EagerStart says which starts).
	dispatcher.EagerStart = role == "all"
	// A request's starts are recorded behind its answer, many per write (DispatchMarks).
	dispatcher.Marks = &model.DispatchMarks{DB: db, Log: logger, Linger: model.DispatchMarkLinger}
	policy := egress.AddressPolicy{AllowPrivate: cfg.AllowPrivateTargets, AllowHTTP: cfg.AllowHTTPTargets}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	var handler http.Handler
	if role == "api" || role == "all" {
		srv, err := api.New(api.Config{
			DB: db, Temporal: tc, Dispatcher: dispatcher, Secrets: secrets, Policy: policy,
			Logger:   logger.With("component", "api"),
			Registry: registry, Gatherer: registry,
			RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, MaxWebhooks: cfg.MaxWebhooks, SiteBaseURL: cfg.SiteBaseURL,
			PublicURL: cfg.PublicURL, PortalOff: !cfg.Portal, Tracer: tracer,
		})
		if err != nil {
			return err
		}
		handler = srv
		if cfg.Portal {
			p, err := portal.New(portal.Config{
				DB: db, Dispatcher: dispatcher, Secrets: secrets, Policy: policy,
				Logger: logger.With("component", "portal"), PublicURL: cfg.PublicURL, FrameAncestors: cfg.PortalFrameAncestors,
				MaxWebhooks: cfg.MaxWebhooks, RateLimit: cfg.RateLimit, RateBurst: cfg.RateBurst, Registry: registry,
				Tracer: tracer,
			})
			if err != nil {
				return err
			}
			handler = withPortal(srv, p)
		}
	} else {
		// A worker alone still answers health checks and scrapes.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		})
		handler = mux
	}
	go func() {
		if err := checkNamespace(ctx, tc, cfg.Temporal.Namespace, logger); err != nil {
			errc <- err
		}
	}()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("WEBHOOKD_HTTP_ADDR: %w", err)
	}
	httpServer := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	logger.Info("http listening", "addr", ln.Addr().String(), "role", role)
	go func() {
		if err := httpServer.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	}()

	if cfg.DebugAddr != "" {
		// Profiles for measuring (docs/performance.md), on a listener of their own so the API's
		// port never exposes them.
		dln, err := net.Listen("tcp", cfg.DebugAddr)
		if err != nil {
			return fmt.Errorf("WEBHOOKD_DEBUG_ADDR: %w", err)
		}
		dmux := http.NewServeMux()
		dmux.HandleFunc("/debug/pprof/", pprof.Index)
		dmux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		dmux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		debugServer := &http.Server{Handler: dmux, ReadHeaderTimeout: 10 * time.Second}
		defer func() { _ = debugServer.Close() }() // the process is ending: nothing to do with its error
		logger.Info("pprof listening", "addr", dln.Addr().String())
		go func() { _ = debugServer.Serve(dln) }()
	}

	workerDone := make(chan struct{})
	if role == "worker" || role == "all" {
		// Set before the first worker exists (the SDK's cache is per process). Deliveries waiting
		// on retry timers would otherwise stay cached, 10,000 by default: hundreds of MB.
		sdkworker.SetStickyWorkflowCacheSize(cfg.WorkflowCacheSize)
		acts, err := newActivities(cfg, db, secrets, policy, registry, logger)
		if err != nil {
			return err
		}
		acts.Tracer = tracer
		go func() {
			defer close(workerDone)
			err := worker.Run(ctx, worker.Config{
				Client: tc, TaskQueue: cfg.TaskQueue, DB: db, Activities: acts, Dispatcher: dispatcher,
				Logger: logger.With("component", "worker"), SweepInterval: cfg.SweepInterval,
				MaxConcurrentDeliveries: cfg.MaxConcurrentDeliveries, MaxConcurrentRetries: cfg.MaxConcurrentRetries,
				// An attempt in flight at a deploy finishes: its timeout, plus recording it.
				StopTimeout: cfg.DeliveryTimeout + 5*time.Second,
				Retention:   worker.Retention{Keep: cfg.Retention},
			})
			if err != nil {
				errc <- err
			}
		}()
	} else {
		close(workerDone)
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-errc:
		logger.Error("stopping after failure", "err", err)
	}
	cancel()
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	if serr := httpServer.Shutdown(shutdownCtx); serr != nil {
		logger.Warn("http shutdown", "err", serr)
	}
	<-workerDone
	dispatcher.Marks.Wait()
	return err
}

// newDispatcher is the Dispatcher of cfg's task queues and delivery settings: serve's, and the operator
// commands' (webhookd webhooks retry|recover), so a delivery they start runs as serve's would.
func newDispatcher(cfg Config, tc client.Client) *dispatch.Dispatcher {
	return &dispatch.Dispatcher{
		Client: tc, TaskQueue: cfg.TaskQueue,
		Schedule: cfg.RetrySchedule, Jitter: cfg.RetryJitter, RetryWindow: cfg.RetryWindow, AttemptTimeout: cfg.DeliveryTimeout,
	}
}

// newActivities builds the delivery worker's dependencies: the one shared delivery client, the
// mailer and the delivery metrics. Both clients trust the same roots, read once.
func newActivities(cfg Config, db *bun.DB, secrets *model.SecretBox, policy egress.AddressPolicy, reg prometheus.Registerer, logger *slog.Logger) (*activities.Activities, error) {
	roots, err := egress.RootCAs(cfg.ExtraCAFile)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOKD_EXTRA_CA_FILE: %w", err)
	}
	out, err := egress.New(egress.Options{
		Policy: policy, RootCAs: roots, Timeout: cfg.DeliveryTimeout,
		HostConcurrency: cfg.HostConcurrency, EndpointConcurrency: cfg.EndpointConcurrency,
		BreakerFailures: cfg.BreakerFailures, BreakerCooldown: cfg.BreakerCooldown, Registerer: reg, Logger: logger.With("component", "egress"),
	})
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
		DB: db, Secrets: secrets, Egress: out, Mailer: mailer,
		Metrics: metrics, UserAgent: "webhookd/" + version, Log: logger.With("component", "activities"),
		Links:       activities.Links{APIBaseURL: cfg.PublicURL, TemporalUIURL: cfg.TemporalUIURL, TemporalNSpace: cfg.Temporal.Namespace},
		SiteBaseURL: cfg.SiteBaseURL,
		Disable:     model.DisableRule{After: cfg.DisableAfter, MinExhausted: cfg.DisableMinExhausted},
		// An eighth of the first attempts' slots may wait briefly for a quick receiver's turn.
		LocalWaits: max(1, cfg.MaxConcurrentDeliveries/8),
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
