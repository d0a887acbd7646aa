package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadCPUOfThisProcess: the CPU this process burns shows in its reading, and a tier's report
// names each watched process with its time per delivery.
func TestReadCPUOfThisProcess(t *testing.T) {
	procs := []cpuProcess{{name: "loadtest"}}
	before := readCPU(procs)
	if _, ok := before["loadtest"]; !ok {
		t.Fatal("this process's CPU time was not read")
	}
	x := 0
	for after := readCPU(procs); after["loadtest"]-before["loadtest"] < 50*time.Millisecond; after = readCPU(procs) {
		for i := range 1_000_000 {
			x += i
		}
	}
	after := readCPU(procs)
	if got := cpuPerDelivery(procs, before, after, 0).String(); got != "-" {
		t.Errorf("no deliveries: %q, want -", got)
	}
	if got := cpuPerDelivery(procs, before, after, 10).String(); len(got) < len("loadtest 5.00") || got[:9] != "loadtest " {
		t.Errorf("report %q (x %d)", got, x)
	}
}

// TestCPUWindowShareAndCostPerUnitOfWork: the figures, 33% of a core over 30 s with 72
// useful attempts, read back as share and ms per attempt.
func TestCPUWindowShareAndCostPerUnitOfWork(t *testing.T) {
	spent := cpuCost{names: []string{"webhookd", "temporal"}, ms: []float64{2100, 9900}}
	w := cpuWindow{name: "steady", length: 30 * time.Second, work: 72, spent: spent}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"webhookd", w.of("webhookd"), "7.0% (29.2 ms)"},
		{"temporal", w.of("temporal"), "33.0% (137.5 ms)"},
		{"all", w.all(), "40.0% (166.7 ms)"},
		{"not read", w.of("postgres"), "-"},
		{"no work", cpuWindow{length: 30 * time.Second, spent: spent}.of("webhookd"), "7.0%"},
		{"nothing read", cpuWindow{length: time.Second}.all(), "-"},
		{"no length", cpuWindow{spent: spent}.all(), "-"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestCPUMeterCountsTheWindowsWork: a window reports the CPU spent and the work done between its
// start and its end, not before.
func TestCPUMeterCountsTheWindowsWork(t *testing.T) {
	procs := []cpuProcess{{name: "loadtest"}}
	m := startCPUMeter(procs, 10)
	x := 0
	for start := readCPU(procs); readCPU(procs)["loadtest"]-start["loadtest"] < 20*time.Millisecond; {
		for i := range 1_000_000 {
			x += i
		}
	}
	w := m.window("busy", 14)
	if w.work != 4 || w.length <= 0 {
		t.Fatalf("work %d, length %s; want 4 and a positive length", w.work, w.length)
	}
	if ms, ok := w.spent.lookup("loadtest"); !ok || ms < 20 {
		t.Fatalf("spent %v ms (read: %v), want at least 20 (x %d)", ms, ok, x)
	}
}

// TestClusterProcessGroups: -api-pids and -worker-pids name groups of trees whose CPU time is summed,
// reported after webhookd's own -pid and before the Temporal server and PostgreSQL; a group with a
// process that cannot be read is left out rather than under-counted.
func TestClusterProcessGroups(t *testing.T) {
	api, err := parsePIDs("api-pids", " 11, 12,")
	if err != nil || len(api) != 2 || api[0] != 11 || api[1] != 12 {
		t.Fatalf("parsePIDs: %v, %v", api, err)
	}
	for _, bad := range []string{"x", "1,-2", "0"} {
		if _, err := parsePIDs("worker-pids", bad); err == nil {
			t.Errorf("parsePIDs(%q) accepted", bad)
		}
	}
	var names []string
	for _, p := range serverProcesses(config{pid: 1, apiPIDs: api, workerPIDs: []int{13}, temporalPID: 2, postgresPID: 3}) {
		names = append(names, p.name)
	}
	if got, want := strings.Join(names, " "), "webhookd webhookd-api webhookd-worker temporal postgres"; got != want {
		t.Errorf("processes %q, want %q", got, want)
	}
	if got := serverProcesses(config{pid: 1, temporalPID: 2}); len(got) != 2 || got[0].name != "webhookd" || !slices.Equal(got[0].pids, []int{1}) {
		t.Errorf("the dev stack's processes changed: %+v", got)
	}

	self := os.Getpid()
	r := readCPU([]cpuProcess{{name: "one", pids: []int{self}}, {name: "two", pids: []int{self, self}}, {name: "gone", pids: []int{self, 1 << 30}}})
	if _, ok := r["gone"]; ok {
		t.Error("a group with a missing process was read")
	}
	if r["two"] < 2*r["one"] {
		t.Errorf("a group of the same tree twice: %v, want at least twice %v", r["two"], r["one"])
	}
}

func TestPostgresDatabaseShares(t *testing.T) {
	for cmdline, want := range map[string]string{
		"postgres: temporal temporal_visibility 127.0.0.1(40122) idle": "temporal_visibility",
		"postgres: webhookd webhookd 127.0.0.1(40123) COMMIT":          "webhookd",
		"postgres: checkpointer":                                       "other",
		"postgres: autovacuum launcher":                                "other",
		"/usr/lib/postgresql/15/bin/postgres -D data":                  "other",
		"": "other",
	} {
		if got := postgresDatabase(cmdline); got != want {
			t.Errorf("postgresDatabase(%q) = %q, want %q", cmdline, got, want)
		}
	}
	procs := []cpuProcess{{name: "postgres", pids: []int{1}, split: postgresDatabase}, {name: "temporal", pids: []int{2}}}
	before := cpuReading{"postgres": 0, "postgres/webhookd": 0, "postgres/other": 0, "temporal": 0}
	after := cpuReading{"postgres": 30 * time.Millisecond, "postgres/webhookd": 10 * time.Millisecond, "postgres/other": 20 * time.Millisecond,
		"postgres/temporal": 5 * time.Millisecond, "temporal": 40 * time.Millisecond}
	c := cpuPerDelivery(procs, before, after, 10)
	if got, want := c.String(), "postgres 3.00, postgres/other 2.00, postgres/webhookd 1.00, temporal 4.00 (all 7.00)"; got != want {
		t.Fatalf("cost = %q, want %q (a share read once is left out, and shares are not added to the total)", got, want)
	}
}
