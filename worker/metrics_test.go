package worker_test

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/webhookd/webhookd/worker"
)

// TestMetricsHandler: the Temporal SDK's counters, gauges and timers reach the Prometheus registry
// under their documented names, every tag becomes a label (uses with different tags make different
// series, none dropped), and timers are histograms in seconds with buckets fit for seconds.
func TestMetricsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := worker.NewMetricsHandler(reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tagged := h.WithTags(map[string]string{"namespace": "default", "task_queue": "webhookd"})
	tagged.Counter("temporal_request").Inc(3)
	tagged.WithTags(map[string]string{"worker_type": "ActivityWorker"}).Gauge("temporal_worker_task_slots_available").Update(7)
	tagged.WithTags(map[string]string{"activity_type": "Deliver"}).Timer("temporal_activity_schedule_to_start_latency").Record(250 * time.Millisecond)
	h.WithTags(map[string]string{"namespace": "default", "operation": "Poll"}).Counter("temporal_request").Inc(1)
	// Asked again, as the SDK asks on every task: the same series, the handler and instrument cached.
	h.WithTags(map[string]string{"task_queue": "webhookd", "namespace": "default"}).Counter("temporal_request").Inc(2)
	tagged.WithTags(map[string]string{"worker_type": "ActivityWorker"}).Gauge("temporal_worker_task_slots_available").Update(5)
	// A tag set again is overwritten, as OpenTelemetry's handler does.
	tagged.WithTags(map[string]string{"task_queue": "webhookd-retry"}).Counter("temporal_request").Inc(4)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var buckets []float64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName() + "{" + labelString(m) + "}"
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[key] = m.GetHistogram().GetSampleSum()
				for _, b := range m.GetHistogram().GetBucket() {
					buckets = append(buckets, b.GetUpperBound())
				}
			}
		}
	}
	want := map[string]float64{
		`temporal_request_total{namespace="default",task_queue="webhookd"}`:                                                      5,
		`temporal_request_total{namespace="default",task_queue="webhookd-retry"}`:                                                4,
		`temporal_request_total{namespace="default",operation="Poll"}`:                                                           1,
		`temporal_worker_task_slots_available{namespace="default",task_queue="webhookd",worker_type="ActivityWorker"}`:           5,
		`temporal_activity_schedule_to_start_latency_seconds{activity_type="Deliver",namespace="default",task_queue="webhookd"}`: 0.25,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series = %v, want exactly %v", got, want)
	}
	for _, le := range []float64{0.01, 0.1, 1, 10, 60} {
		if !slices.Contains(buckets, le) {
			t.Errorf("latency buckets %v lack le=%v: not seconds", buckets, le)
		}
	}
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
