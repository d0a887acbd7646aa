package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/webhookd/webhookd/activities"
)

// TestWorkerStopTimeoutFromBudget: the worker waits at a stop for an attempt in flight as long as
// the attempt budget of WEBHOOKD_DELIVERY_TIMEOUT says, which covers its exchange and its record.
func TestWorkerStopTimeoutFromBudget(t *testing.T) {
	for _, timeout := range []string{"1s", "5s", "90s"} {
		cfg, err := loadConfig([]string{"WEBHOOKD_DELIVERY_TIMEOUT=" + timeout})
		if err != nil {
			t.Fatal(err)
		}
		got := workerConfig(cfg, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil))).StopTimeout
		if want := (activities.AttemptBudget{Timeout: cfg.DeliveryTimeout}).StopTimeout(); got != want {
			t.Errorf("WEBHOOKD_DELIVERY_TIMEOUT=%s: stop timeout %v, want the budget's %v", timeout, got, want)
		}
		if inFlight := cfg.DeliveryTimeout + activities.RecordMargin; got < inFlight {
			t.Errorf("WEBHOOKD_DELIVERY_TIMEOUT=%s: stop timeout %v, less than an attempt's exchange and record (%v)", timeout, got, inFlight)
		}
	}
}
