package tracing

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/webhookd/webhookd/workflows"
)

// TestReplayWithInterceptor: the recorded DeliveryWorkflow histories (workflows/testdata, recorded
// without tracing) replay with the tracing interceptor in place, so turning tracing on changes no
// command of a running delivery; and the interceptor did run (it made the workflow's spans).
func TestReplayWithInterceptor(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
	ti, err := tr.TemporalInterceptor()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "workflows", "testdata", "delivery-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories in workflows/testdata: %v", err)
	}
	logger := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, file := range files {
		r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{ti}})
		if err != nil {
			t.Fatal(err)
		}
		r.RegisterWorkflow(workflows.DeliveryWorkflow)
		if err := r.ReplayWorkflowHistoryFromJSONFile(logger, file); err != nil {
			t.Errorf("replay %s with the tracing interceptor: %v", filepath.Base(file), err)
		}
	}
	runs := 0
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "RunWorkflow:DeliveryWorkflow") {
			runs++
		}
	}
	if runs == 0 {
		t.Fatalf("no RunWorkflow span in %d replays: the interceptor did not run", len(files))
	}
}
