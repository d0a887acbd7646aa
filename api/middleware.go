package api

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/internal/routemetrics"
	"github.com/webhookd/webhookd/model"
)

const (
	headerRequestID = "X-Request-Id"
	contextAccount  = "webhookd.account"
	// contextKeyLookup is the key's public lookup id (the rate limiter's bucket), contextAPIKey
	// its row id (what a portal link records) and scope (what it may do), a
	// model.AuthenticatedKey (keyOf).
	contextKeyLookup = "webhookd.key"
	contextAPIKey    = "webhookd.apikey"
	// contextBodyLimit names the body limit of the route, for the 413 message.
	contextBodyLimit = "webhookd.bodylimit"
	// contextArrived is when the request arrived, before it waited for anything (time.Time).
	contextArrived = "webhookd.arrived"
)

// A client-supplied request id is kept only when it is short and plain, so it cannot forge log lines.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestIDMiddleware gives every request an id, echoed in X-Request-Id and written with every log
// line about it, so a client's report of a 500 can be matched to the log.
func requestIDMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(contextArrived, model.Now())
		id := c.Request().Header.Get(headerRequestID)
		if !requestIDPattern.MatchString(id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			id = "req_" + hex.EncodeToString(b)
		}
		c.Response().Header().Set(headerRequestID, id)
		return next(c)
	}
}

func requestID(c echo.Context) string {
	return c.Response().Header().Get(headerRequestID)
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.log.Info("http request",
			"request_id", requestID(c), "method", c.Request().Method, "route", c.Path(),
			"status", c.Response().Status, "duration", time.Since(start))
		return nil
	}
}

// authenticate resolves the variant's credential header to an account. The other variant's header
// is refused, so a key pasted into the wrong integration fails loudly instead of half-working.
func (s *Server) authenticate(v *variant) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key, aerr := v.credential(c.Request())
			if aerr != nil {
				if v.spec.AuthScheme != "" {
					c.Response().Header().Set("WWW-Authenticate", v.spec.AuthScheme+` realm="webhookd"`)
				}
				return aerr
			}
			account, apiKey, err := s.accounts.Authenticate(c.Request().Context(), key)
			if err != nil {
				if v.spec.AuthScheme != "" {
					c.Response().Header().Set("WWW-Authenticate", v.spec.AuthScheme+` realm="webhookd", error="invalid_token"`)
				}
				return err
			}
			c.Set(contextAccount, account)
			c.Set(contextKeyLookup, model.APIKeyLookup(key))
			c.Set(contextAPIKey, apiKey)
			// The use cases record the key as who made the changes (the audit log).
			c.SetRequest(c.Request().WithContext(audit.WithActor(c.Request().Context(), audit.APIKey(apiKey.ID, account.OwnerEmail))))
			return next(c)
		}
	}
}

func accountOf(c echo.Context) *model.Account {
	return c.Get(contextAccount).(*model.Account)
}

// httpMetrics counts and times API requests by route template.
func httpMetrics(reg prometheus.Registerer) (echo.MiddlewareFunc, error) {
	return routemetrics.Middleware(reg, routemetrics.Names{
		Requests:     "webhookd_http_requests_total",
		RequestsHelp: "Management API requests by method, route and status code.",
		Duration:     "webhookd_http_request_duration_seconds",
		DurationHelp: "Management API request latency by method and route.",
	}, nil)
}

// arrivedAt is when the request arrived, before it waited for anything (contextArrived); the time
// of the call when no middleware recorded it.
func arrivedAt(c echo.Context) time.Time {
	if at, ok := c.Get(contextArrived).(time.Time); ok {
		return at
	}
	return model.Now()
}
