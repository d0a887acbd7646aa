package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestPersistencePerDelivery(t *testing.T) {
	scrape := func(update, start, visibility float64) persistenceOps {
		text := `# TYPE persistence_requests counter
persistence_requests{operation="UpdateWorkflowExecution",service_name="history"} ` + ftoa(update) + `
persistence_requests{operation="CreateWorkflowExecution",service_name="history"} ` + ftoa(start) + `
persistence_requests{operation="GetTasks",service_name="history"} 5
# TYPE visibility_persistence_requests counter
visibility_persistence_requests{operation="RecordWorkflowExecutionClosed",service_name="history"} ` + ftoa(visibility) + `
`
		ops := parsePersistence(strings.NewReader(text))
		if ops == nil {
			t.Fatal("the metrics did not parse")
		}
		return ops
	}
	got := persistencePerDelivery(scrape(100, 10, 0), scrape(300, 110, 100), 100)
	want := "UpdateWorkflowExecution 2.00, CreateWorkflowExecution 1.00, visibility:RecordWorkflowExecutionClosed 1.00 (all 4.00)"
	if got != want {
		t.Fatalf("got %q, want %q (an unchanged operation is left out)", got, want)
	}
	if got := persistencePerDelivery(nil, scrape(1, 1, 1), 10); got != "" {
		t.Fatalf("a failed scrape gave %q", got)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
