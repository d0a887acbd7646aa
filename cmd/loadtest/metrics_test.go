package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestScrapeStartsReadsTheCounterOrReportsItAbsent(t *testing.T) {
	withMetric := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`# HELP webhookd_delivery_starts_total Delivery workflows started.
# TYPE webhookd_delivery_starts_total counter
webhookd_delivery_starts_total{by="activity"} 0
webhookd_delivery_starts_total{by="request"} 316
webhookd_delivery_starts_total{by="sweeper"} 684
webhookd_http_requests_total{code="202"} 9
`))
	}))
	defer withMetric.Close()
	c := scrapeStarts(t.Context(), withMetric.URL)
	if !c.ok || c.request != 316 || c.sweeper != 684 || c.activity != 0 {
		t.Fatalf("scrape = %+v, want request 316, sweeper 684", c)
	}

	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("webhookd_http_requests_total{code=\"202\"} 9\n"))
	}))
	defer older.Close()
	if c := scrapeStarts(t.Context(), older.URL); c.ok {
		t.Fatalf("a build without the metric gave %+v", c)
	}
	if d := awaitStarts(t.Context(), config{api: older.URL, progress: 1}, startCounts{}, 10); d.ok || d.String() != "n/a" {
		t.Fatalf("delta without the metric = %+v (%s), want n/a", d, d)
	}
	noMetrics := httptest.NewServer(http.NotFoundHandler())
	defer noMetrics.Close()
	if c := scrapeStarts(t.Context(), noMetrics.URL); c.ok {
		t.Fatalf("a stack without /metrics gave %+v", c)
	}
	d := startDelta{ok: true, request: 316, sweeper: 684}
	if d.String() != "316 / 684" {
		t.Fatalf("String() = %q", d)
	}
}
