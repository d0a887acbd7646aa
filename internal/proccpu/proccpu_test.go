package proccpu

import (
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	write := func(pid, ppid int, ut, st, cut, cst uint64) { writeProc(t, proc, pid, ppid, ut, st, cut, cst, "") }
	write(10, 1, 100, 50, 30, 20) // the root: 200 ticks with its reaped children
	write(11, 10, 40, 10, 0, 0)   // a child: 50
	write(12, 11, 5, 5, 0, 0)     // a grandchild: 10
	write(20, 1, 999, 999, 0, 0)  // not in the tree
	got, err := Tree(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := 260 * time.Second / time.Duration(clockTicks()); got != want {
		t.Fatalf("Tree = %v, want %v", got, want)
	}
	if _, err := Tree(proc, 99); err == nil {
		t.Fatal("a missing process was read")
	}
}

func TestByChild(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, ppid int, ut, st, cut, cst uint64, cmdline string) {
		writeProc(t, proc, pid, ppid, ut, st, cut, cst, cmdline)
	}
	write(10, 1, 100, 50, 30, 20, "postgres\x00-D\x00data\x00")                  // the postmaster: 200 ticks
	write(11, 10, 40, 10, 0, 0, "postgres: temporal temporal 127.0.0.1(1) idle") // 50
	write(12, 10, 5, 5, 0, 0, "postgres: temporal temporal 127.0.0.1(2) idle")   // 10
	write(13, 10, 7, 3, 0, 0, "postgres: webhookd webhookd 127.0.0.1(3) idle")   // 10
	write(14, 10, 1, 1, 0, 0, "postgres: checkpointer")                          // 2
	write(15, 13, 2, 2, 0, 0, "")                                                // 4, in its parent's tree
	write(20, 1, 999, 999, 0, 0, "postgres: other other")                        // not a child
	db := func(cmdline string) string {
		f := strings.Fields(cmdline)
		if len(f) >= 4 && f[0] == "postgres:" {
			return f[2]
		}
		return "other"
	}
	got, err := ByChild(proc, 10, db)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Second / time.Duration(clockTicks())
	want := map[string]time.Duration{"": 200 * tick, "temporal": 60 * tick, "webhookd": 14 * tick, "other": 2 * tick}
	if !maps.Equal(got, want) {
		t.Fatalf("ByChild = %v, want %v", got, want)
	}
	tree, err := Tree(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, d := range got {
		sum += d
	}
	if sum != tree {
		t.Fatalf("ByChild sums to %v, Tree reads %v", sum, tree)
	}
	if _, err := ByChild(proc, 99, db); err == nil {
		t.Fatal("a missing process was read")
	}
}

// writeProc writes a process's stat and cmdline files into a test's copy of /proc (and its self
// directory, which clockTicks reads).
func writeProc(t *testing.T, proc string, pid, ppid int, ut, st, cut, cst uint64, cmdline string) {
	t.Helper()
	dir := filepath.Join(proc, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	line := strconv.Itoa(pid) + " (p) S " + strconv.Itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 " +
		strconv.FormatUint(ut, 10) + " " + strconv.FormatUint(st, 10) + " " + strconv.FormatUint(cut, 10) + " " + strconv.FormatUint(cst, 10) + " 20 0 1 0 1 0 0\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644); err != nil {
		t.Fatal(err)
	}
}
