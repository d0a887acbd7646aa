package worker

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// NewMetricsHandler exposes the Temporal SDK's own metrics (workflow task latencies, activity
// polls, request failures, ...) through client_golang, so one /metrics page shows the SDK beside
// webhookd's series. A metric's label names are fixed by its first use, as Prometheus requires;
// a later use with other tags fills missing labels with "" and drops unknown ones.
func NewMetricsHandler(reg prometheus.Registerer) client.MetricsHandler {
	return &metricsHandler{store: &metricStore{reg: reg, vecs: map[string]*metricVec{}}}
}

type metricStore struct {
	reg  prometheus.Registerer
	mu   sync.Mutex
	vecs map[string]*metricVec
}

type metricVec struct {
	labels    []string
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
}

type metricsHandler struct {
	store *metricStore
	tags  map[string]string
}

func (h *metricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &metricsHandler{store: h.store, tags: merged}
}

func (h *metricsHandler) Counter(name string) client.MetricsCounter {
	v, values := h.store.get(name, h.tags, "counter")
	if v == nil {
		return client.MetricsNopHandler.Counter(name)
	}
	return counter{v.counter.WithLabelValues(values...)}
}

func (h *metricsHandler) Gauge(name string) client.MetricsGauge {
	v, values := h.store.get(name, h.tags, "gauge")
	if v == nil {
		return client.MetricsNopHandler.Gauge(name)
	}
	return gauge{v.gauge.WithLabelValues(values...)}
}

func (h *metricsHandler) Timer(name string) client.MetricsTimer {
	v, values := h.store.get(name, h.tags, "timer")
	if v == nil {
		return client.MetricsNopHandler.Timer(name)
	}
	return timer{v.histogram.WithLabelValues(values...)}
}

// get returns the vector for name, creating and registering it on first use, and the label values
// of tags in its label order. It returns nil when registration fails (a name clash): the SDK's
// metric is then dropped rather than breaking the worker.
func (s *metricStore) get(name string, tags map[string]string, kind string) (*metricVec, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vecs[kind+":"+name]
	if !ok {
		labels := make([]string, 0, len(tags))
		for k := range tags {
			labels = append(labels, sanitize(k))
		}
		slices.Sort(labels)
		labels = slices.Compact(labels)
		v = &metricVec{labels: labels}
		var c prometheus.Collector
		help := "Temporal SDK metric " + name + "."
		switch kind {
		case "counter":
			v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: sanitize(name), Help: help}, labels)
			c = v.counter
		case "gauge":
			v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: sanitize(name), Help: help}, labels)
			c = v.gauge
		default:
			v.histogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: sanitize(name) + "_seconds", Help: help,
				Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, labels)
			c = v.histogram
		}
		if err := s.reg.Register(c); err != nil {
			v = nil
		}
		s.vecs[kind+":"+name] = v
	}
	if v == nil {
		return nil, nil
	}
	values := make([]string, len(v.labels))
	for k, val := range tags {
		if i := slices.Index(v.labels, sanitize(k)); i >= 0 {
			values[i] = val
		}
	}
	return v, values
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

type counter struct{ c prometheus.Counter }

func (c counter) Inc(n int64) { c.c.Add(float64(n)) }

type gauge struct{ g prometheus.Gauge }

func (g gauge) Update(v float64) { g.g.Set(v) }

type timer struct{ h prometheus.Observer }

func (t timer) Record(d time.Duration) { t.h.Observe(d.Seconds()) }
