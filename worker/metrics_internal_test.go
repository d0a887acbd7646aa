package worker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCachedMetricsBound: past its bound the cache keeps nothing more, and what it no longer keeps
// is still counted, in the same series as before.
func TestCachedMetricsBound(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := NewMetricsHandler(reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	small := newCachedMetrics(h.(*cachedMetrics).inner, 3)
	for round := range 2 {
		for i := range 5 {
			small.WithTags(map[string]string{"task_queue": fmt.Sprint("q", i)}).Counter("temporal_request").Inc(int64(round + 1))
		}
	}
	if n := small.cache.size.Load(); n != 3 {
		t.Errorf("cache holds %d entries, want its bound, 3", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "temporal_request_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				got[l.GetName()+"="+l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	for i := range 5 {
		if key := fmt.Sprint("task_queue=q", i); got[key] != 3 {
			t.Errorf("%s counted %v, want 3 (1 + 2)", key, got[key])
		}
	}
	if len(got) != 5 {
		t.Errorf("series %v, want 5", got)
	}
}
