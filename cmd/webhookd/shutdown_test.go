package main

import (
	"slices"
	"testing"
)

// TestShutdownRunsStagesInOrder: whatever order serve's parts were built in, run ends them stage
// by stage in the declared order (within a stage, the last added first), each once.
func TestShutdownRunsStagesInOrder(t *testing.T) {
	var down shutdown
	var ran []string
	step := func(name string) func() { return func() { ran = append(ran, name) } }
	// The order serve builds its parts in: the database, tracing, the client, the marks, the
	// HTTP server, the debug server, the worker; the run's context is canceled first.
	down.at(endRun, step("cancel"))
	down.at(closeDB, step("db"))
	down.at(flushTraces, step("traces"))
	down.at(closeTemporal, step("temporal"))
	down.at(flushMarks, step("marks"))
	down.at(stopHTTP, step("http"))
	down.at(stopDebug, step("debug"))
	down.at(stopWorker, step("worker"))
	down.at(closeDB, step("db, added last"))
	down.run()
	want := []string{"cancel", "http", "worker", "marks", "debug", "traces", "temporal", "db, added last", "db"}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	down.run()
	if len(ran) != len(want) {
		t.Fatalf("a second run ran %v", ran[len(want):])
	}
}

// TestShutdownOrder holds the stages to the reasons for their order.
func TestShutdownOrder(t *testing.T) {
	for _, c := range []struct {
		first, then stage
		why         string
	}{
		{endRun, stopWorker, "the worker stops when the run's context ends"},
		{stopHTTP, stopWorker, "the API stops taking requests before the worker is waited for"},
		{stopHTTP, flushMarks, "requests hand marks over until they end"},
		{stopHTTP, closeTemporal, "requests start workflows through the client"},
		{stopWorker, closeTemporal, "the worker polls through the client"},
		{stopHTTP, flushTraces, "the last starts' spans end before the flush exports them"},
		{stopWorker, flushTraces, "the last attempts' spans end before the flush exports them"},
		{flushTraces, closeTemporal, "the traces are flushed before the client closes"},
		{flushMarks, closeDB, "the marks are written to the database"},
		{stopWorker, closeDB, "attempts in flight record their outcome"},
	} {
		if c.first >= c.then {
			t.Errorf("stage %d must run before stage %d: %s", c.first, c.then, c.why)
		}
	}
}
