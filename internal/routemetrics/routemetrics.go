// Package routemetrics counts and times the requests of an Echo server by route template, never
// by raw path: ids do not explode the label space, and a token carried in a query reaches no
// label. The management API and the portal both count their requests through it.
package routemetrics

import (
	"fmt"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// Names are a server's two metric names and what each counts.
type Names struct {
	Requests, RequestsHelp string // a counter by method, route and status code
	Duration, DurationHelp string // a histogram in seconds by method and route
}

// Unmatched is the route of a request that matched none.
const Unmatched = "unmatched"

// Middleware hands a handler's error to the server's error handler, so the status it counts is
// the one the client gets, then counts the request in reg (if not nil) and calls after (if not
// nil) with its route and duration.
func Middleware(reg prometheus.Registerer, n Names, after func(c echo.Context, route string, took time.Duration)) (echo.MiddlewareFunc, error) {
	var requests *prometheus.CounterVec
	var duration *prometheus.HistogramVec
	if reg != nil {
		requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Requests, Help: n.RequestsHelp},
			[]string{"method", "route", "code"})
		duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: n.Duration, Help: n.DurationHelp, Buckets: prometheus.DefBuckets},
			[]string{"method", "route"})
		for _, c := range []prometheus.Collector{requests, duration} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register %s: %w", n.Requests, err)
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
				route = Unmatched
			}
			took := time.Since(start)
			if after != nil {
				after(c, route, took)
			}
			if requests != nil {
				method := c.Request().Method
				requests.WithLabelValues(method, route, strconv.Itoa(c.Response().Status)).Inc()
				duration.WithLabelValues(method, route).Observe(took.Seconds())
			}
			return nil
		}
	}, nil
}
