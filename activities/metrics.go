package activities

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/model"
)

// Metrics are the delivery engine's Prometheus series.
type Metrics struct {
	// Deliveries counts attempts by outcome: "delivered" or the failure class.
	Deliveries      *prometheus.CounterVec
	AttemptDuration *prometheus.HistogramVec
	Alerts          prometheus.Counter
	// Exhausted counts deliveries whose schedule ran out, each time one does (a retried activity
	// may count one twice).
	Exhausted prometheus.Counter
	// InternalFailures counts deliveries ended by an internal error no retry can fix, by its
	// error type (ErrTypeDeliveryMissing, ErrTypeSecretUnreadable, ErrTypeVersionUnconvertible). Alert on any increase.
	InternalFailures *prometheus.CounterVec
	// Notices counts notice attempts to notification endpoints by type, channel and outcome.
	Notices *prometheus.CounterVec
}

// noticeChannels name the kinds of notification endpoint on the metrics.
var noticeChannels = map[string]string{model.KindNoticeEmail: "email", model.KindNoticeWebhook: "webhook", model.KindNoticeChat: "chat"}

// observeNotice counts one attempt of a notice of type noticeType to a channel of kind kind, and
// an e-mail sent as an alert.
func (m *Metrics) observeNotice(kind, noticeType string, sent bool) {
	outcome := "sent"
	if !sent {
		outcome = "failed"
	}
	m.Notices.WithLabelValues(noticeType, noticeChannels[kind], outcome).Inc()
	if sent && kind == model.KindNoticeEmail {
		m.Alerts.Inc()
	}
}

// NewMetrics registers the delivery metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_deliveries_total",
			Help: "Delivery attempts by variant, event type and outcome (delivered, or the failure class).",
		}, []string{"variant", "event_type", "outcome"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhookd_delivery_attempt_duration_seconds",
			Help:    "Duration of one delivery attempt, from dial to the end of the reply.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"variant", "outcome"}),
		Alerts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_alerts_total",
			Help: "Notices e-mailed to webhook owners (docs/notifications.md): webhook.failing, the spec's alert, among them.",
		}),
		Exhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhookd_deliveries_exhausted_total",
			Help: "Deliveries whose retry schedule ran out without a success (the webhook is marked failing).",
		}),
		Notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_notices_total",
			Help: "Notice attempts to notification endpoints (docs/notifications.md) by notice type, channel (email, webhook, chat) and outcome (sent, failed).",
		}, []string{"type", "channel", "outcome"}),
		InternalFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_delivery_internal_failures_total",
			Help: "Deliveries ended by an internal error that no retry can fix (a missing delivery row, an unreadable secret), by error type.",
		}, []string{"error_type"}),
	}
	for _, c := range []prometheus.Collector{m.Deliveries, m.AttemptDuration, m.Alerts, m.Exhausted, m.InternalFailures, m.Notices} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register delivery metrics: %w", err)
		}
	}
	// Series exist at 0 from the start, so increase() sees the first failure and an alert can use them.
	for _, errType := range []string{ErrTypeDeliveryMissing, ErrTypeSecretUnreadable, ErrTypeVersionUnconvertible} {
		m.InternalFailures.WithLabelValues(errType)
	}
	return m, nil
}

func (m *Metrics) observeAttempt(v model.Variant, eventType string, res DeliverResult, latency time.Duration) {
	outcome := "delivered"
	if !res.Delivered {
		outcome = res.ErrorClass
	}
	m.Deliveries.WithLabelValues(string(v), eventType, outcome).Inc()
	m.AttemptDuration.WithLabelValues(string(v), outcome).Observe(latency.Seconds())
}
