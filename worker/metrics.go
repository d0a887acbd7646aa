package worker

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
	return newCachedMetrics(opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{
		Meter: provider.Meter("go.temporal.io/sdk"),
		// Prometheus counters, so rate() works; the default UpDownCounter would export gauges.
		UseMonotonicCounters: true,
		// The default panics. A metric the meter refuses is dropped and logged, never fatal.
		OnError: func(err error) { logger.Warn("temporal sdk metric dropped", "err", err) },
	}), maxCachedMetrics), nil
}

// maxCachedMetrics bounds the tagged handlers and instruments cachedMetrics keeps. The SDK's tags
// name namespaces, task queues, workflow and activity types and operations, a few hundred
// combinations at most; past the bound it builds each one anew, as without the cache.
const maxCachedMetrics = 4096

// cachedMetrics keeps the tagged handlers and the instruments that the SDK asks its metrics handler
// for. The SDK asks on every task (WithTags, then Counter, Gauge or Timer by name), and the
// OpenTelemetry handler builds an attribute set and looks the instrument up in its meter each
// time: 5% of webhookd's CPU per delivery and an eighth of its allocations in a profile
// (docs/performance-history.md). A cached instrument records into the same series as a new
// one would.
type cachedMetrics struct {
	inner client.MetricsHandler
	// tags is the chain of WithTags calls that made this handler, each call's tags in key order.
	tags  string
	cache *metricsCache
}

type metricsCache struct {
	max     int64
	entries sync.Map // a handler's tags and what was asked of it -> the handler or instrument
	size    atomic.Int64
}

func newCachedMetrics(inner client.MetricsHandler, limit int64) *cachedMetrics {
	return &cachedMetrics{inner: inner, cache: &metricsCache{max: limit}}
}

// get returns the entry under key, made by build the first time, or each time once the cache is full.
func get[T any](c *metricsCache, key string, build func() T) T {
	if v, ok := c.entries.Load(key); ok {
		return v.(T)
	}
	v := build()
	if c.size.Load() < c.max {
		if prev, loaded := c.entries.LoadOrStore(key, v); loaded {
			return prev.(T)
		}
		c.size.Add(1)
	}
	return v
}

// WithTags returns the handler with tags added (a tag already set is overwritten), as the inner
// handler does. Two chains that end with the same tags are two entries, each correct.
func (m *cachedMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(m.tags)
	b.WriteByte('{')
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(tags[k])
		b.WriteByte(0)
	}
	key := b.String()
	return get(m.cache, key, func() client.MetricsHandler {
		return &cachedMetrics{inner: m.inner.WithTags(tags), tags: key, cache: m.cache}
	})
}

func (m *cachedMetrics) Counter(name string) client.MetricsCounter {
	return get(m.cache, m.tags+"\x00counter "+name, func() client.MetricsCounter { return m.inner.Counter(name) })
}

func (m *cachedMetrics) Gauge(name string) client.MetricsGauge {
	return get(m.cache, m.tags+"\x00gauge "+name, func() client.MetricsGauge { return m.inner.Gauge(name) })
}

func (m *cachedMetrics) Timer(name string) client.MetricsTimer {
	return get(m.cache, m.tags+"\x00timer "+name, func() client.MetricsTimer { return m.inner.Timer(name) })
}

// Unwrap returns the OpenTelemetry handler, for opentelemetry.ExtractMetricsHandler.
func (m *cachedMetrics) Unwrap() client.MetricsHandler { return m.inner }
