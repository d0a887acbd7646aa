package api

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// webhooksCollector reports webhookd_webhooks{variant,status} from the database at scrape time, so
// the gauge is right whichever process changed a status.
type webhooksCollector struct {
	db   *bun.DB
	log  *slog.Logger
	desc *prometheus.Desc
}

func newWebhooksCollector(db *bun.DB, log *slog.Logger) *webhooksCollector {
	return &webhooksCollector{db: db, log: log, desc: prometheus.NewDesc("webhookd_webhooks",
		"Registered webhooks by variant and status.", []string{"variant", "status"}, nil)}
}

func (c *webhooksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *webhooksCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := model.CountWebhooksByStatus(ctx, c.db)
	if err != nil {
		c.log.Warn("webhooks gauge", "err", err)
		return
	}
	for _, v := range []model.Variant{model.VariantA, model.VariantB} {
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
