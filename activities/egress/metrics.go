package egress

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Client's Prometheus series. They carry no host label: receiver hosts are chosen
// by customers and unbounded in number. A nil *metrics records nothing.
type metrics struct {
	hostBusyTotal    prometheus.Counter
	circuitOpenTotal prometheus.Counter
	circuitsOpen     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		hostBusyTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_egress_host_busy_total",
			Help: "Exchanges refused without a connection because their receiver host had too many in flight.",
		}),
		circuitOpenTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_egress_circuit_open_total",
			Help: "Exchanges refused without a connection because their receiver host's circuit breaker was open.",
		}),
		circuitsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "webhookd_egress_circuits_open",
			Help: "Receiver hosts whose circuit breaker is open or half-open in this process.",
		}),
	}
	for _, c := range []prometheus.Collector{m.hostBusyTotal, m.circuitOpenTotal, m.circuitsOpen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register egress metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) hostBusy() {
	if m != nil {
		m.hostBusyTotal.Inc()
	}
}

func (m *metrics) circuitOpen() {
	if m != nil {
		m.circuitOpenTotal.Inc()
	}
}

func (m *metrics) circuitOpened() {
	if m != nil {
		m.circuitsOpen.Inc()
	}
}

func (m *metrics) circuitClosed() {
	if m != nil {
		m.circuitsOpen.Dec()
	}
}
