package portal

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// observe logs every portal request and, given a registry, counts it in
// webhookd_portal_requests_total and webhookd_portal_request_duration_seconds. It names a request
// by its route (/portal/webhooks/:id), never by its address: the query of /portal/enter holds the
// link's token, which must reach no log.
func observe(reg prometheus.Registerer, log *slog.Logger) (echo.MiddlewareFunc, error) {
	var requests *prometheus.CounterVec
	var duration *prometheus.HistogramVec
	if reg != nil {
		requests = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_portal_requests_total",
			Help: "Owner's portal requests by method, route and status code.",
		}, []string{"method", "route", "code"})
		duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_portal_request_duration_seconds",
			Help:    "Owner's portal request latency by method and route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"})
		for _, c := range []prometheus.Collector{requests, duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register portal metrics: %w", err)
			}
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				c.Error(err)
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			took := time.Since(start)
			log.Info("portal request", "method", c.Request().Method, "route", route, "status", c.Response().Status, "duration", took)
			if requests != nil {
				requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(c.Response().Status)).Inc()
				duration.WithLabelValues(c.Request().Method, route).Observe(took.Seconds())
			}
			return nil
		}
	}, nil
}
