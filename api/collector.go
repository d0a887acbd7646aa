package api

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// webhooksCollector reports webhookd_webhooks{variant,status} and
// webhookd_webhook_certificates_expiring from the database at scrape time, so the gauges are right
// whichever process changed a webhook, through the use cases' counts.
type webhooksCollector struct {
	uses     *webhooks.Service
	log      *slog.Logger
	desc     *prometheus.Desc
	expiring *prometheus.Desc
}

func newWebhooksCollector(uses *webhooks.Service, log *slog.Logger) *webhooksCollector {
	return &webhooksCollector{uses: uses, log: log, desc: prometheus.NewDesc("webhookd_webhooks",
		"Registered webhooks by variant and status.", []string{"variant", "status"}, nil),
		expiring: prometheus.NewDesc("webhookd_webhook_certificates_expiring",
			"Webhooks whose TLS settings hold a certificate (client or CA) that expires within 14 days or has expired.", nil, nil)}
}

func (c *webhooksCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.expiring
}

func (c *webhooksCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.uses.CountCertificatesExpiring(ctx)
	if err == nil {
		var m prometheus.Metric
		if m, err = prometheus.NewConstMetric(c.expiring, prometheus.GaugeValue, float64(n)); err == nil {
			ch <- m
		}
	}
	if err != nil {
		c.log.Warn("certificates gauge", "err", err)
	}
	counts, err := c.uses.CountByStatus(ctx)
	if err != nil {
		c.log.Warn("webhooks gauge", "err", err)
		return
	}
	for _, v := range model.Variants {
		// A disabled webhook counts as disabled in both variants, though variant A has no such
		// status: an operator wants that number.
		statuses := v.Statuses()
		if !slices.Contains(statuses, model.StatusDisabled) {
			statuses = append(statuses, model.StatusDisabled)
		}
		for _, s := range statuses {
			var n int64
			for _, sc := range counts {
				if sc.Variant == v && sc.Status == s {
					n = sc.Count
				}
			}
			m, err := prometheus.NewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(v), s)
			if err != nil {
				c.log.Warn("webhooks gauge", "err", err)
				return
			}
			ch <- m
		}
	}
}

var dependencyUp = prometheus.NewDesc("webhookd_dependency_up",
	"Whether a dependency answers (1) or not (0), checked at scrape time: database or temporal.", []string{"dependency"}, nil)

// dependencyCollector reports webhookd_dependency_up{dependency}, so an alert can fire on Temporal
// being away although readiness (the database only) stays green.
type dependencyCollector struct{ s *Server }

func (c dependencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dependencyUp }

func (c dependencyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	database, temporal := c.s.checkDependencies(ctx)
	for name, state := range map[string]string{"database": database, "temporal": temporal} {
		up := 0.0
		if state == "ok" {
			up = 1
		}
		m, err := prometheus.NewConstMetric(dependencyUp, prometheus.GaugeValue, up, name)
		if err != nil {
			c.s.log.Warn("dependency gauge", "err", err)
			return
		}
		ch <- m
	}
}
