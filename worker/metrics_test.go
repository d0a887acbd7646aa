package worker_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/worker"
)

// TestMetricsHandler: the Temporal SDK's counters, gauges and timers reach the Prometheus registry,
// and a later use with other tags neither panics nor breaks the series.
func TestMetricsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := worker.NewMetricsHandler(reg)
	tagged := h.WithTags(map[string]string{"namespace": "default", "task_queue": "webhookd"})
	tagged.Counter("temporal_request").Inc(3)
	tagged.Gauge("temporal_worker_task_slots_available").Update(7)
	tagged.Timer("temporal_request_latency").Record(250 * time.Millisecond)
	h.WithTags(map[string]string{"namespace": "default", "operation": "Poll"}).Counter("temporal_request").Inc(1)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[key] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	want := map[string]float64{
		"temporal_request,namespace=default,task_queue=webhookd":                     3,
		"temporal_request,namespace=default,task_queue=":                             1,
		"temporal_worker_task_slots_available,namespace=default,task_queue=webhookd": 7,
		"temporal_request_latency_seconds,namespace=default,task_queue=webhookd":     0.25,
	}
	if len(got) != len(want) {
		t.Fatalf("series = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
