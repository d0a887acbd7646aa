// Package api is webhookd's REST surface: the management API of both variants (webhooks, secrets),
// health and readiness probes, the OpenAPI document and Prometheus metrics. Handlers are methods on
// Server; every error leaves through one handler that shapes it as the caller's variant envelope.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/docs"
	"github.com/webhookd/webhookd/readiness"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/tracing"
	"github.com/webhookd/webhookd/webhooks"
)

// Body limits in bytes: management requests (DESIGN.md, "Errors": 413 over 64 KiB) and event
// payloads (DESIGN.md, "Limits": 256 KiB).
const (
	maxBodyBytes  = 64 << 10
	maxEventBytes = 256 << 10
)

// Config carries the API's dependencies and limits.
type Config struct {
	// Webhooks runs the use cases of webhooks and their deliveries, shared with the portal and
	// the CLI; it publishes every event the API's changes emit. Required.
	Webhooks *webhooks.Service
	// Sources runs the use cases of the event sources: campaigns, websites and their scheduled
	// publication, fan intake. Required.
	Sources *sources.Service
	// Accounts authenticates each request's API key and issues portal links, under the same
	// rules as the operator's CLI. Required.
	Accounts *accounts.Service
	// Readiness answers /readyz and the dependency gauge, and tells an outage from a defect.
	// Required.
	Readiness *readiness.Checker
	Logger    *slog.Logger
	// Registry receives the API's metrics; Gatherer serves /metrics. Either may be nil.
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	// RateLimit is requests per second per API key, with RateBurst. Both are required.
	RateLimit float64
	RateBurst int
	// PublicURL is where clients reach this server (WEBHOOKD_PUBLIC_URL): the JSON Schemas' $id
	// start there. Empty makes them relative.
	PublicURL string
	// Tracer, when set, makes a server span of every request (tracing.ServerSpans), under which
	// an event's delivery workflows start. Nil, no middleware is installed at all.
	Tracer trace.Tracer
}

// Server holds what the handlers need.
type Server struct {
	// webhooks holds the use cases; its Change and Publish commit a change with the events it
	// emits, then start their deliveries.
	webhooks *webhooks.Service
	// sources holds the sources' use cases, which publish through webhooks.
	sources           *sources.Service
	accounts          *accounts.Service
	readiness         *readiness.Checker
	log               *slog.Logger
	publicURL         string
	retryAfterSeconds int
	echo              *echo.Echo
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Webhooks == nil:
		return nil, errors.New("api: Webhooks is required")
	case cfg.Accounts == nil:
		return nil, errors.New("api: Accounts is required")
	case cfg.Readiness == nil:
		return nil, errors.New("api: Readiness is required")
	}
	if cfg.Sources == nil {
		return nil, errors.New("api: Sources is required")
	}
	// The limits are the caller's to set (cmd/webhookd's Config has their defaults): a zero would
	// refuse every request.
	if cfg.RateLimit <= 0 || cfg.RateBurst <= 0 {
		return nil, fmt.Errorf("api: RateLimit %v, RateBurst %d: must be positive", cfg.RateLimit, cfg.RateBurst)
	}
	s := &Server{
		webhooks:          cfg.Webhooks,
		sources:           cfg.Sources,
		accounts:          cfg.Accounts,
		readiness:         cfg.Readiness,
		log:               cfg.Logger,
		publicURL:         cfg.PublicURL,
		retryAfterSeconds: int(math.Max(1, math.Ceil(1/cfg.RateLimit))),
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(requestIDMiddleware)
	if cfg.Tracer != nil {
		// Outside logRequests, which hands errors to the error handler: the span sees the status
		// the client gets, and the request id.
		e.Use(tracing.ServerSpans(cfg.Tracer))
	}
	e.Use(s.logRequests)
	if cfg.Registry != nil {
		metrics, err := httpMetrics(cfg.Registry)
		if err != nil {
			return nil, err
		}
		e.Use(metrics)
		if err := cfg.Registry.Register(newWebhooksCollector(cfg.Webhooks, cfg.Logger)); err != nil {
			return nil, fmt.Errorf("register webhooks gauge: %w", err)
		}
		if err := cfg.Registry.Register(dependencyCollector{s}); err != nil {
			return nil, fmt.Errorf("register dependency gauge: %w", err)
		}
	}
	e.Use(middleware.Recover())

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", docs.OpenAPI) })
	s.schemaRoutes(e)
	if cfg.Gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})))
	}

	limiter := middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(cfg.RateLimit), Burst: cfg.RateBurst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) { return c.Get(contextKeyLookup).(string), nil },
		DenyHandler:         func(echo.Context, string, error) error { return errRateLimited },
	})
	var unscoped []string
	for _, v := range []*variant{variantA, variantB} {
		// The variant, auth and rate limit go on each route rather than on the group: group
		// middleware makes Echo register a catch-all that answers 404 where a path exists with
		// other methods, which must be 405 with Allow.
		g := e.Group(v.prefix)
		// route registers a route with the API key scopes it admits (scopes.go): need comes after
		// the key is authenticated and counted, before anything reads the request.
		route := func(method, path string, admits scopes, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
			if len(admits.admitted) == 0 {
				unscoped = append(unscoped, method+" "+v.prefix+path)
			}
			chain := []echo.MiddlewareFunc{withVariant(v), s.authenticate(v), limiter, need(admits), singleParameters}
			g.Add(method, path, h, append(chain, m...)...)
		}
		const get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
		small, large := bodyLimit(maxBodyBytes), bodyLimit(maxEventBytes)
		h := &deliveryHandlers{Server: s, v: v}
		route(get, "/webhooks", forRead, h.list)
		route(post, "/webhooks", forManage, h.create, small)
		route(post, "/webhooks/filter-test", forManage, h.filterTest, small)
		route(get, "/webhooks/:id", forRead, h.get)
		route(put, "/webhooks/:id", forManage, h.update, small)
		route(patch, "/webhooks/:id", forManage, h.patch, small)
		route(del, "/webhooks/:id", forManage, h.delete)
		route(get, "/webhooks/:id/health", forRead, h.health)
		route(get, "/webhooks/:id/secret", forManage, h.secret)
		route(post, "/webhooks/:id/secret/rotate", forManage, h.rotateSecret, small)
		route(post, "/webhooks/:id/retry", forManage, h.retry, small)
		route(post, "/webhooks/:id/disable", forManage, h.disable, small)
		route(post, "/webhooks/:id/enable", forManage, h.enable, small)
		route(get, "/webhooks/:id/deliveries", forRead, h.deliveries)
		route(get, "/webhooks/:id/deliveries/:deliveryId", forRead, h.delivery)
		route(post, "/webhooks/:id/deliveries/:deliveryId/retry", forManage, h.retryDelivery, small)
		route(post, "/webhooks/:id/recover", forManage, h.recoverSince, small)
		route(get, "/webhooks/:id/lanes", forRead, h.lanes)
		route(get, "/webhooks/:id/lanes/:laneId", forRead, h.lane)
		route(post, "/webhooks/:id/lanes/:laneId/retry", forManage, h.retryLane, small)
		route(post, "/webhooks/:id/lanes/:laneId/skip", forManage, h.skipLane, small)
		route(post, "/webhooks/:id/test", forManage, h.test, small)
		route(post, "/events", forPublish, h.publishEvent, large)
		route(get, "/events", forEventLog, h.listEvents)
		route(get, "/events/:id", forEventLog, h.getEvent)
		route(get, "/event-types", forEventLog, h.eventTypes)
		route(post, "/portal-sessions", forPortalLink, h.createPortalSession, small)
		// Issue 46: the delivery log across webhooks (read), and replays (a replay sends: manage;
		// its counts: read).
		route(get, "/deliveries", forRead, h.accountDeliveries)
		route(post, "/replays", forManage, h.replay, small)
		route(get, "/replays/:id", forRead, h.getReplay)
		route(del, "/replays/:id", forManage, h.cancelReplay)
		nh := &channelHandlers{Server: s, v: v}
		route(get, "/notification-endpoints", forRead, nh.list)
		route(post, "/notification-endpoints", forManage, nh.create, small)
		route(get, "/notification-endpoints/:id", forRead, nh.get)
		route(put, "/notification-endpoints/:id", forManage, nh.change, small)
		route(patch, "/notification-endpoints/:id", forManage, nh.change, small)
		route(del, "/notification-endpoints/:id", forManage, nh.delete)
		route(post, "/notification-endpoints/:id/test", forManage, nh.test, small)
		route(get, "/notices", forRead, nh.notices)
		// The audit log (issue 46).
		route(get, "/audit-log", forRead, h.auditLog)
		if v == variantB {
			// Creating and changing a website is managing it; fan intake publishes events.
			wh := &websiteHandlers{Server: s}
			route(get, "/websites", forRead, wh.list)
			route(post, "/websites", forManage, wh.create, small)
			route(get, "/websites/:id", forRead, wh.get)
			route(del, "/websites/:id", forManage, wh.delete)
			route(post, "/websites/:id/publish", forManage, wh.publishWebsite, small)
			route(post, "/websites/:id/archive", forManage, wh.archive, small)
			route(post, "/websites/:id/leads", forPublish, wh.lead, small)
			route(post, "/websites/:id/presaves", forPublish, wh.presave, small)
			route(post, "/websites/:id/analytics", forPublish, wh.analytics, small)
		}
		if v == variantA {
			ch := &campaignHandlers{Server: s}
			route(get, "/campaigns", forRead, ch.list)
			route(post, "/campaigns", forManage, ch.create, small)
			route(get, "/campaigns/:id", forRead, ch.get)
			route(patch, "/campaigns/:id", forManage, ch.patch, small)
		}
	}
	if len(unscoped) > 0 {
		return nil, fmt.Errorf("api: routes without a scope: %v", unscoped)
	}
	s.echo = e
	return s, nil
}

// bodyLimit refuses bodies over limit bytes (a multiple of 1024) and tells the error handler the
// limit's name, so a 413 says which limit the request broke, whether it was refused for its
// Content-Length or while a handler read a chunked body. Both are written from limit: Echo reads
// "64K" as 64,000 bytes, "64KiB" as 65,536.
func bodyLimit(limit int) echo.MiddlewareFunc {
	limited := middleware.BodyLimit(fmt.Sprintf("%dKiB", limit>>10))
	name := fmt.Sprintf("%d KiB", limit>>10)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := limited(next)
		return func(c echo.Context) error {
			c.Set(contextBodyLimit, name)
			return h(c)
		}
	}
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

func withVariant(v *variant) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(contextVariant, v)
			return next(c)
		}
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the database answers: intake and management need nothing else, since
// the outbox holds deliveries while Temporal is away. Temporal's state is reported beside it
// (status "degraded"), so a load balancer keeps every replica while operators still see it.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	database, temporal := s.checkDependencies(ctx)
	status, code := "ok", http.StatusOK
	switch {
	case database != "ok":
		status, code = "unavailable", http.StatusServiceUnavailable
	case temporal != "ok":
		status = "degraded"
	}
	return c.JSON(code, map[string]any{"status": status, "checks": map[string]string{"database": database, "temporal": temporal}})
}

// checkDependencies asks the database and Temporal whether they answer: "ok" or "unavailable".
func (s *Server) checkDependencies(ctx context.Context) (database, temporal string) {
	return s.readiness.Check(ctx)
}
