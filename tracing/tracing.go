// Package tracing is webhookd's OpenTelemetry tracing: whether it is on (the standard OTEL_*
// variables), the process's tracer provider and its OTLP exporter, the server span of an HTTP
// request, and the Temporal SDK's tracing interceptor. Off by default, and then nothing of it is
// built: no provider, no middleware, no interceptor, so a delivery pays nothing for it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL). The specification's default is
// http/protobuf; Go's exporters have no http/json.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// defaultServiceName is service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
// otherwise.
const defaultServiceName = "webhookd"

// scope names the spans webhookd makes itself (the request, the outbound POST); the Temporal
// interceptor's have their own.
const scope = "github.com/webhookd/webhookd"

// Config is what the OTEL_* variables say about traces. The zero Config is off.
type Config struct {
	// On: an exporter is configured (OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint is set).
	On bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
}

// samplers are the OTEL_TRACES_SAMPLER values the SDK knows. The SDK reads the variable itself but
// only reports a value it does not know to OpenTelemetry's error handler and samples everything:
// a typo in production would trace every request at full cost. So an unknown one stops the
// process instead.
var samplers = []string{
	"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio",
}

// ConfigFromEnv reads the OTEL_* variables that decide whether traces are exported and how:
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp: on; any other exporter is refused (webhookd carries only OTLP's).
//   - unset, the exporter is on when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and off otherwise.
//   - protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else
//     http/protobuf; grpc is the other one.
//
// Everything else (endpoint, headers, timeout, sampler, batch sizes, resource) the SDK reads
// itself when Start builds the provider; the endpoints' form and the sampler's name are checked
// here, so that a typo stops the process instead of losing every span or sampling everything.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(key string) string {
		v, _ := lookup(key)
		return strings.TrimSpace(v)
	}
	if disabled, err := strconv.ParseBool(get("OTEL_SDK_DISABLED")); err == nil && disabled {
		return Config{}, nil
	}
	var cfg Config
	switch exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return Config{}, nil
	case "otlp":
		cfg.On = true
	case "":
		cfg.On = get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not otlp or none (webhookd exports traces over OTLP only)", exporter)
	}
	if !cfg.On {
		return Config{}, nil
	}
	var errs []error
	cfg.Protocol = ProtocolHTTP
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := get(key); p != "" {
			if p != ProtocolHTTP && p != ProtocolGRPC {
				errs = append(errs, fmt.Errorf("%s: %q is not http/protobuf or grpc", key, p))
			}
			cfg.Protocol = p
			break
		}
	}
	// The exporters take an endpoint without a scheme for a path, and only report it at the
	// first export.
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if e := get(key); e != "" {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s: %q is not a URL such as http://collector:4318", key, e))
			}
		}
	}
	if s := strings.ToLower(get("OTEL_TRACES_SAMPLER")); s != "" && !slices.Contains(samplers, s) {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not one of %s", s, strings.Join(samplers, ", ")))
	}
	if arg := get("OTEL_TRACES_SAMPLER_ARG"); arg != "" && strings.HasSuffix(strings.ToLower(get("OTEL_TRACES_SAMPLER")), "traceidratio") {
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			errs = append(errs, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio from 0 to 1", arg))
		}
	}
	return cfg, errors.Join(errs...)
}

// Tracing is the process's tracer provider, exporting in batches over OTLP.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// propagator is how a trace travels between processes: the W3C traceparent and tracestate, and
// baggage. Start sets it globally too, for libraries that read the global one.
var propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Start builds the provider of cfg (nil when cfg is off): the OTLP exporter of cfg.Protocol, which
// reads its endpoint, headers, timeout, compression and certificates from the OTEL_EXPORTER_OTLP_*
// variables; a batch span processor (OTEL_BSP_*); the sampler of OTEL_TRACES_SAMPLER (default
// parentbased_always_on); and a resource with service.name (defaultServiceName unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set it), service.version and
// OTEL_RESOURCE_ATTRIBUTES. It becomes the global provider, and the W3C propagator the global one.
// Export failures are logged on logger, never fatal: a collector that is away loses spans, not
// deliveries.
func Start(ctx context.Context, cfg Config, version string, logger *slog.Logger) (*Tracing, error) {
	if !cfg.On {
		return nil, nil
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case ProtocolGRPC:
		exporter, err = otlptracegrpc.New(ctx)
	default:
		exporter, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	// Later detectors win: the variables override the defaults.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(defaultServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("opentelemetry", "err", err) }))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagator)
	return &Tracing{provider: provider}, nil
}

// Tracer makes webhookd's own spans.
func (t *Tracing) Tracer() trace.Tracer { return t.provider.Tracer(scope) }

// Shutdown exports the spans still queued and stops the exporter; spans ended after it are lost.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }
