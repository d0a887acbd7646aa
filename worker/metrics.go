package worker

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
)

// sdkLatencyBuckets are the bucket bounds, in seconds, of the Temporal SDK's latency histograms
// (request, poll, schedule-to-start, execution). OpenTelemetry's default bounds (0 to 10000) suit
// milliseconds and would put every sample in the first buckets.
var sdkLatencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// NewMetricsHandler exposes the Temporal SDK's own metrics (task slots, schedule-to-start latency,
// polls, request failures, ...) on reg, beside webhookd's series, through the SDK's OpenTelemetry
// handler and OpenTelemetry's Prometheus exporter. Every series keeps the SDK's tags as labels
// (namespace, task_queue, worker_type, workflow_type, activity_type, operation, ...).
//
// Names are translated the Prometheus way and are stable: counters get _total
// (temporal_request_total), timers are histograms in seconds with _seconds
// (temporal_activity_schedule_to_start_latency_seconds), gauges keep their name
// (temporal_worker_task_slots_available). No otel_scope_* labels and no target_info series are
// added: one process exports one scope.
//
// The exporter is read at scrape time and holds nothing to flush, so there is nothing to shut down.
func NewMetricsHandler(reg prometheus.Registerer, logger *slog.Logger) (client.MetricsHandler, error) {
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("temporal sdk metrics: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exporter),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: sdkLatencyBuckets}},
		)),
	)
	return opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{
		Meter: provider.Meter("go.temporal.io/sdk"),
		// Prometheus counters, so rate() works; the default UpDownCounter would export gauges.
		UseMonotonicCounters: true,
		// The default panics. A metric the meter refuses is dropped and logged, never fatal.
		OnError: func(err error) { logger.Warn("temporal sdk metric dropped", "err", err) },
	}), nil
}
