package tracing

import (
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// requestIDKey is the attribute of a request's X-Request-Id, the id its log lines and its error
// envelope carry.
const requestIDKey = attribute.Key("webhookd.request_id")

// ServerSpans makes a server span of every request, named by its method and route template
// ("POST /v2/svc/v2/events"), with the method, the route and the status code. It never records
// the URL, its query, a header or a body: the portal's /portal/enter?token= carries a secret, and
// requests carry API keys, cookies and payloads. A caller's W3C traceparent is continued, so the
// event's trace starts in the caller's; its baggage is not taken, since it would ride into every
// delivery workflow's Temporal header and stay in its history.
//
// Install it outermost, before the error handler runs: it hands a returned error to Echo's
// handler itself, so the status it records is the one the client gets.
func ServerSpans(tracer trace.Tracer) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			method := knownMethod(r.Method)
			name, route := method, c.Path()
			attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method)}
			if route != "" {
				name += " " + route
				attrs = append(attrs, semconv.HTTPRouteKey.String(route))
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			if err := next(c); err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(status))
			if status >= 500 {
				// A server span fails on a 5xx only: a 4xx is the caller's mistake, answered well.
				span.SetStatus(codes.Error, "")
				span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			}
			if id := c.Response().Header().Get(echo.HeaderXRequestID); id != "" {
				span.SetAttributes(requestIDKey.String(id))
			}
			return nil
		}
	}
}

// knownMethod is the method as a span may name it: a client chooses the method string, and an
// unknown one named as sent would make a span name of each.
func knownMethod(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE":
		return m
	}
	return "_OTHER"
}
