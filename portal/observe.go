package portal

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/internal/routemetrics"
)

// observe logs every portal request and, given a registry, counts it in
// webhookd_portal_requests_total and webhookd_portal_request_duration_seconds. It names a request
// by its route (/portal/webhooks/:id), never by its address: the query of /portal/enter holds the
// link's token, which must reach no log.
func observe(reg prometheus.Registerer, log *slog.Logger) (echo.MiddlewareFunc, error) {
	return routemetrics.Middleware(reg, routemetrics.Names{
		Requests:     "webhookd_portal_requests_total",
		RequestsHelp: "Owner's portal requests by method, route and status code.",
		Duration:     "webhookd_portal_request_duration_seconds",
		DurationHelp: "Owner's portal request latency by method and route.",
	}, func(c echo.Context, route string, took time.Duration) {
		log.Info("portal request", "method", c.Request().Method, "route", route, "status", c.Response().Status, "duration", took)
	})
}
