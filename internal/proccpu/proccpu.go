// Package proccpu reads how much CPU time processes have used, from Linux's /proc: the measure
// of work the benchmarks and the system tests compare, since it moves much less with the
// machine's load than any rate does (docs/performance.md).
package proccpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Tree is the CPU time, user and system, of the process pid and of its descendants, those alive
// and those it reaped; proc is where /proc is mounted ("/proc", or a test's copy).
func Tree(proc string, pid int) (time.Duration, error) {
	stats, err := readStats(proc)
	if err != nil {
		return 0, err
	}
	if _, ok := stats[pid]; !ok {
		return 0, fmt.Errorf("no process %d", pid)
	}
	children := map[int][]int{}
	for p, s := range stats {
		children[s.ppid] = append(children[s.ppid], p)
	}
	var ticks uint64
	var walk func(int)
	walk = func(p int) {
		s := stats[p]
		ticks += s.utime + s.stime + s.cutime + s.cstime
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks()), nil
}

// ByChild is Tree split by pid's direct children: each child's tree is summed under the label
// label gives its command line (/proc/<child>/cmdline, NUL bytes as spaces), and pid's own time,
// with the children it reaped, under "". PostgreSQL's backends are the postmaster's children, and
// each names its database in its command line ("postgres: user db 127.0.0.1(5432) idle"), so the
// database's share of the server's CPU can be told apart. A child that ends between two readings
// moves from its label to "" (the postmaster reaps it).
func ByChild(proc string, pid int, label func(cmdline string) string) (map[string]time.Duration, error) {
	stats, err := readStats(proc)
	if err != nil {
		return nil, err
	}
	root, ok := stats[pid]
	if !ok {
		return nil, fmt.Errorf("no process %d", pid)
	}
	children := map[int][]int{}
	for p, s := range stats {
		children[s.ppid] = append(children[s.ppid], p)
	}
	var tree func(int) uint64
	tree = func(p int) uint64 {
		s := stats[p]
		t := s.utime + s.stime + s.cutime + s.cstime
		for _, c := range children[p] {
			t += tree(c)
		}
		return t
	}
	ticks := map[string]uint64{"": root.utime + root.stime + root.cutime + root.cstime}
	for _, c := range children[pid] {
		b, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(c), "cmdline")) // ended: ""
		ticks[label(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")))] += tree(c)
	}
	out := make(map[string]time.Duration, len(ticks))
	for l, t := range ticks {
		out[l] += time.Duration(t) * time.Second / time.Duration(clockTicks())
	}
	return out, nil
}

// procStat is what Tree needs of a /proc/<pid>/stat line.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime uint64
}

// readStats reads the stat line of every process under proc.
func readStats(proc string) (map[int]procStat, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	stats := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // the process ended meanwhile
		}
		if s, err := parseStat(string(b)); err == nil {
			stats[pid] = s
		}
	}
	return stats, nil
}

// parseStat parses a /proc/<pid>/stat line (proc(5)). The command name, in parentheses, may hold
// spaces and parentheses itself, so the fields are counted from the last ')'.
func parseStat(line string) (procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var s procStat
	var err error
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("stat ppid: %w", err)
	}
	for j, dst := range []*uint64{&s.utime, &s.stime, &s.cutime, &s.cstime} {
		v, err := strconv.ParseInt(f[11+j], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", 14+j, err)
		}
		*dst = uint64(max(v, 0))
	}
	return s, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: AT_CLKTCK in this process's
// auxiliary vector, 100 when it cannot be read (its value on every Linux architecture Go runs on).
func clockTicks() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	const atClkTck = 17
	for i := 0; i+16 <= len(b); i += 16 {
		if binary.NativeEndian.Uint64(b[i:]) == atClkTck {
			if v := binary.NativeEndian.Uint64(b[i+8:]); v > 0 {
				return v
			}
		}
	}
	return 100
}

// Self is the CPU time, user and system, that this process has used, to the microsecond
// (getrusage): what a benchmark divides by its runs, where Tree's clock ticks (10 ms) are too
// coarse for one run.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
