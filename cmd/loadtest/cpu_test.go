package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as proc(5) allows.
	line := "4242 (web hookd (x)) S 17 4242 17 0 -1 4194560 100 0 0 0 250 75 12 3 20 0 12 0 100 0 0\n"
	s, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{ppid: 17, utime: 250, stime: 75, cutime: 12, cstime: 3}); s != want {
		t.Fatalf("parseStat = %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) S notanumber 1 1 1 1 1 1 1 1 1 1 1 1 1 1"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// TestTreeCPU: a process tree's CPU time is its processes' own and their reaped children's, from
// the root down; processes outside the tree do not count.
func TestTreeCPU(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, ppid int, ut, st, cut, cst uint64) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(pid) + " (p) S " + strconv.Itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 " +
			strconv.FormatUint(ut, 10) + " " + strconv.FormatUint(st, 10) + " " + strconv.FormatUint(cut, 10) + " " + strconv.FormatUint(cst, 10) + " 20 0 1 0 1 0 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(10, 1, 100, 50, 30, 20) // the root: 200 ticks with its reaped children
	write(11, 10, 40, 10, 0, 0)   // a child: 50
	write(12, 11, 5, 5, 0, 0)     // a grandchild: 10
	write(20, 1, 999, 999, 0, 0)  // not in the tree
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := treeCPU(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := 260 * time.Second / time.Duration(clockTicks()); got != want {
		t.Fatalf("treeCPU = %v, want %v", got, want)
	}
	if _, err := treeCPU(proc, 99); err == nil {
		t.Fatal("a missing process was read")
	}
}

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
