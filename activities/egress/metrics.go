package egress

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Client's Prometheus series. They carry no host or URL label: receiver hosts are
// chosen by customers and unbounded in number, and a URL may hold a credential. A nil *metrics
// records nothing.
type metrics struct {
	waitsTotal       *prometheus.CounterVec
	waitSeconds      *prometheus.HistogramVec
	circuitOpenTotal *prometheus.CounterVec
	circuitsOpen     *prometheus.GaugeVec
	// proxyUpGauge and proxyFailures are the egress proxy's (proxyGate); without one, up and none.
	proxyUpGauge  prometheus.Gauge
	proxyFailures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		waitsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_egress_waits_total",
			Help: "Exchanges held back, without a connection, by reason: host_cap (the host's slots were taken and went to accounts holding fewer), endpoint_cap, rate_limit, breaker (a probe was in flight), proxy (the egress proxy failed or is down). A held exchange is a wait, never a failure.",
		}, []string{"reason"}),
		waitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_egress_wait_seconds",
			Help:    "How long held exchanges waited in the worker for their turn, by reason; zero for those held back at once with an appointment.",
			Buckets: []float64{0, .01, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"reason"}),
		circuitOpenTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_egress_circuit_open_total",
			Help: "Exchanges failed fast, without a connection, by an open breaker: their endpoint's (scope=endpoint) or their host's (scope=host).",
		}, []string{"scope"}),
		circuitsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "webhookd_egress_circuits_open",
			Help: "Breakers open or half-open in this process, by scope: endpoints (webhooks) or receiver hosts.",
		}, []string{"scope"}),
	}
	for _, r := range HoldReasons {
		m.waitsTotal.WithLabelValues(string(r))
		m.waitSeconds.WithLabelValues(string(r))
	}
	for _, s := range []string{scopeEndpoint, scopeHost} {
		m.circuitOpenTotal.WithLabelValues(s)
		m.circuitsOpen.WithLabelValues(s)
	}
	for _, c := range []prometheus.Collector{m.waitsTotal, m.waitSeconds, m.circuitOpenTotal, m.circuitsOpen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register egress metrics: %w", err)
		}
	}
	return m, nil
}

// registerProxy registers the egress proxy's series.
func (m *metrics) registerProxy(reg prometheus.Registerer) error {
	if m == nil {
		return nil
	}
	m.proxyUpGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "webhookd_egress_proxy_up",
		Help: "0 while the egress proxy (WEBHOOKD_EGRESS_PROXY) is down as this process sees it: deliveries are then held, not failed, and one exchange at a time probes it; 1 otherwise, and without a proxy.",
	})
	m.proxyFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "webhookd_egress_proxy_failures_total",
		Help: "Exchanges that met a failure of the egress proxy itself (not reachable, its TLS, our credentials refused, no tunnel in time); each was held, not failed.",
	})
	for _, c := range []prometheus.Collector{m.proxyUpGauge, m.proxyFailures} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register egress proxy metrics: %w", err)
		}
	}
	return nil
}

// registerEndpoints registers the breaker state of each endpoint whose breaker is not closed, read
// from hs at every scrape: one series per such webhook, so the series stay as few as the failing
// endpoints.
func (m *metrics) registerEndpoints(reg prometheus.Registerer, hs *hosts) error {
	if m == nil {
		return nil
	}
	if err := reg.Register(endpointBreakers{hs}); err != nil {
		return fmt.Errorf("register egress metrics: %w", err)
	}
	return nil
}

var endpointBreakerDesc = prometheus.NewDesc("webhookd_egress_endpoint_breaker",
	"1 for each endpoint (webhook) whose breaker is open or half_open in this process; closed ones have no series.",
	[]string{"account", "webhook", "state"}, nil)

type endpointBreakers struct{ hs *hosts }

func (endpointBreakers) Describe(ch chan<- *prometheus.Desc) { ch <- endpointBreakerDesc }

func (c endpointBreakers) Collect(ch chan<- prometheus.Metric) {
	c.hs.mu.Lock()
	defer c.hs.mu.Unlock()
	for _, e := range c.hs.endpoints {
		var state string
		switch e.breaker.state {
		case open:
			state = "open"
		case halfOpen:
			state = "half_open"
		default:
			continue
		}
		ch <- prometheus.MustNewConstMetric(endpointBreakerDesc, prometheus.GaugeValue, 1,
			strconv.FormatInt(e.account, 10), strconv.FormatInt(e.webhook, 10), state)
	}
}

func (m *metrics) held(r HoldReason, waited time.Duration) {
	if m != nil {
		m.waitsTotal.WithLabelValues(string(r)).Inc()
		m.waitSeconds.WithLabelValues(string(r)).Observe(waited.Seconds())
	}
}

func (m *metrics) proxyUp(up bool) {
	if m != nil && m.proxyUpGauge != nil {
		v := 0.0
		if up {
			v = 1
		}
		m.proxyUpGauge.Set(v)
	}
}

func (m *metrics) proxyFailed() {
	if m != nil && m.proxyFailures != nil {
		m.proxyFailures.Inc()
	}
}

func (m *metrics) circuitOpen(scope string) {
	if m != nil {
		m.circuitOpenTotal.WithLabelValues(scope).Inc()
	}
}

func (m *metrics) circuitOpened(scope string) {
	if m != nil {
		m.circuitsOpen.WithLabelValues(scope).Inc()
	}
}

func (m *metrics) circuitClosed(scope string) {
	if m != nil {
		m.circuitsOpen.WithLabelValues(scope).Dec()
	}
}
