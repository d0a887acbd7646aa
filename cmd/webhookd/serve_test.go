package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/internal/otlpsink"
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

// TestServeFlushesTracesAtStop: the spans still queued when serve stops are exported before it
// returns (the flush stage), after the API has stopped: here the one of a request answered just
// before the stop, with the exporter's own batches a minute apart.
func TestServeFlushesTracesAtStop(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	sink := otlpsink.New(true)
	collector := httptest.NewServer(sink)
	defer collector.Close()
	// The exporter reads its endpoint from the process's environment, as the OpenTelemetry SDK
	// does; the Config only turns tracing on.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := loadConfig([]string{
		"WEBHOOKD_DATA_DIR=" + t.TempDir(), "WEBHOOKD_HTTP_ADDR=" + addr,
		"TEMPORAL_ADDRESS=127.0.0.1:1", // nothing listens: the lazy client never connects
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DatabaseURL = "sqlite:" + filepath.Join(cfg.DataDir, "webhookd.db")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, "api", slog.New(slog.DiscardHandler)) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API never answered: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned at start: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if n := sink.Count(); n != 0 {
		t.Fatalf("%d spans exported before the stop; the test needs them queued", n)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after the stop")
	}
	var names []string
	for _, s := range sink.Spans() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "GET /healthz") {
		t.Fatalf("spans exported by the stop: %v, want the request's GET /healthz", names)
	}
}
