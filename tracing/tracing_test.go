package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestConfigFromEnv: tracing is on only when an exporter or an OTLP endpoint is named, none and
// OTEL_SDK_DISABLED turn it off, and what webhookd cannot export stops the process.
func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		on       bool
		protocol string
		err      string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "w", "OTEL_TRACES_SAMPLER": "always_on"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, protocol: ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true, protocol: ProtocolHTTP},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: ProtocolHTTP},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: ProtocolHTTP},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratoi"}, err: "OTEL_TRACES_SAMPLER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "1%"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "0.01"}, on: true, protocol: ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, err: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector/v1/traces"}, err: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: ProtocolGRPC},
		// Off, nothing is read beyond the switch: an exporter's settings are not checked.
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}},
	} {
		cfg, err := ConfigFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want one naming %s", tc.env, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case cfg.On != tc.on || cfg.Protocol != tc.protocol:
			t.Errorf("%v: %+v, want on %v, protocol %q", tc.env, cfg, tc.on, tc.protocol)
		}
	}
}

// TestStartOff: off, Start builds nothing.
func TestStartOff(t *testing.T) {
	tr, err := Start(context.Background(), Config{}, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if tr != nil || err != nil {
		t.Fatalf("Start(off) = %v, %v; want nil, nil", tr, err)
	}
}

// TestServerSpans: a request's span is named by its route template and carries the method, the
// route and the status, a caller's trace is continued, and nothing of the URL's query or the
// headers is recorded.
func TestServerSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	e := echo.New()
	e.Use(ServerSpans(tracer))
	e.GET("/portal/enter", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderXRequestID, "req_1")
		return c.String(http.StatusOK, "ok")
	})
	e.POST("/v1/webhooks/:id", func(echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable) })

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := httptest.NewRequest("GET", "/portal/enter?token=s3cr3t-token", nil)
	req.Header.Set("traceparent", parent)
	req.Header.Set("Authorization", "Bearer whk_secretkey")
	req.Header.Set("baggage", "user=someone")
	e.ServeHTTP(httptest.NewRecorder(), req)
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/webhooks/42?x=1", strings.NewReader(`{"secret":"body"}`)))
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/portal/s3cr3t", nil))
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/portal/enter/s3cr3t", nil))

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	want := []struct {
		name, attrs string
	}{
		{"GET /portal/enter", "http.request.method=GET http.route=/portal/enter http.response.status_code=200 webhookd.request_id=req_1"},
		{"POST /v1/webhooks/:id", "http.request.method=POST http.route=/v1/webhooks/:id http.response.status_code=503 error.type=503"},
		{"_OTHER", "http.request.method=_OTHER http.response.status_code=404"},
		{"GET", "http.request.method=GET http.response.status_code=404"},
	}
	for i, s := range spans {
		var attrs []string
		for _, kv := range s.Attributes() {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
		}
		got := strings.Join(attrs, " ")
		if s.Name() != want[i].name || got != want[i].attrs {
			t.Errorf("span %d: %q {%s}, want %q {%s}", i, s.Name(), got, want[i].name, want[i].attrs)
		}
		if strings.Contains(got, "s3cr3t") || strings.Contains(got, "whk_") || strings.Contains(got, "secret") || strings.Contains(got, "someone") {
			t.Errorf("span %d records a secret: %s", i, got)
		}
	}
	if got := spans[0].SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the caller's trace is not continued: trace %s", got)
	}
	if spans[1].Parent().IsValid() {
		t.Errorf("a request without traceparent has a parent: %v", spans[1].Parent())
	}
}
