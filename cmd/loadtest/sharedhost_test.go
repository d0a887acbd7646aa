package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFailedAttemptsCountsOnlyThePhasesEventsByClass(t *testing.T) {
	status := func(code int) *int { return &code }
	class := func(c string) *string { return &c }
	ds := []delivery{
		{EventID: 1, AttemptLog: []attempt{{StatusCode: status(204)}}},
		{EventID: 2, AttemptLog: []attempt{{ErrorClass: class("circuit_open")}, {ErrorClass: class("circuit_open")}, {StatusCode: status(200)}}},
		{EventID: 3, AttemptLog: []attempt{{StatusCode: status(500)}, {ErrorClass: class("timeout")}, {}}},
		{EventID: 9, AttemptLog: []attempt{{ErrorClass: class("timeout")}}}, // another phase's event
	}
	for _, tc := range []struct {
		name   string
		events []int64
		want   string
	}{
		{"delivered at once", []int64{1}, "0"},
		{"no deliveries listed", []int64{4}, "0"},
		{"failures by class", []int64{1, 2, 3}, "5 (HTTP 500 1, circuit_open 2, timeout 1, unclassified 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pubs []publication
			for _, id := range tc.events {
				pubs = append(pubs, publication{eventID: id})
			}
			if got := failedAttempts(ds, pubs); got != tc.want {
				t.Errorf("failedAttempts = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHoldTimerTimesTheHangingReceiversHolds(t *testing.T) {
	held := &holdTimer{next: &hangingReceiver{}}
	url, _, client := testReceiver(t, held)
	if got := held.String(); got != "none held to its end yet" {
		t.Fatalf("before any request: %q", got)
	}
	// The client gives up as webhookd does at its delivery timeout.
	const timeout = 200 * time.Millisecond
	client.Timeout = timeout
	resp, err := client.Post(url+"/hang/0", "application/json", strings.NewReader(`{"a":1}`))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the hanging receiver answered %d", resp.StatusCode)
	}
	// The receiver notices the hang-up a moment after the client gave up.
	var holds []obs
	for deadline := time.Now().Add(5 * time.Second); len(holds) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no hold recorded 5 s after the client gave up")
		}
		time.Sleep(10 * time.Millisecond)
		held.mu.Lock()
		holds = slices.Clone(held.held)
		held.mu.Unlock()
	}
	if len(holds) != 1 || holds[0].d < timeout/2 || holds[0].d > timeout+2*time.Second {
		t.Fatalf("holds %v, want one of about the client's %s", holds, timeout)
	}
	if got := held.String(); !strings.HasPrefix(got, "1 held until webhookd hung up: min ") {
		t.Errorf("String() = %q", got)
	}
}

// TestPrintCPUWindows: one column per watched process and one for all of them, one row per window,
// and no blank line, so that bench-isolation.sh's summary (the output's last paragraph) keeps it.
func TestPrintCPUWindows(t *testing.T) {
	procs := []cpuProcess{{name: "webhookd", pids: []int{12}}, {name: "temporal", pids: []int{34}}}
	windows := []cpuWindow{
		{name: "idle", length: 10 * time.Second, spent: cpuCost{names: []string{"webhookd", "temporal"}, ms: []float64{100, 300}}},
		{name: "steady", length: 30 * time.Second, work: 72, spent: cpuCost{names: []string{"webhookd", "temporal"}, ms: []float64{2100, 9900}}},
	}
	var b strings.Builder
	if err := printCPUWindows(&b, procs, windows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\n\n") {
		t.Errorf("a blank line:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a title, a header and 2 rows:\n%s", len(lines), out)
	}
	for i, want := range [][]string{
		{"window", "length", "B's requests", "webhookd", "temporal", "all"},
		{"idle", "10.0 s", "1.0%", "3.0%", "4.0%"},
		{"steady", "30.0 s", "72", "7.0% (29.2 ms)", "33.0% (137.5 ms)", "40.0% (166.7 ms)"},
	} {
		for _, cell := range want {
			if !strings.Contains(lines[i+1], cell) {
				t.Errorf("line %q lacks %q", lines[i+1], cell)
			}
		}
	}
}
