package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU time per delivery (issue 21): throughput moves with the machine's load, CPU time per unit of
// work much less. A process's CPU time is read from /proc/<pid>/stat, with that of its descendants
// (the Temporal dev server runs under a script; PostgreSQL's backends are the postmaster's
// children), so a tier's cost is the difference of two readings.

// cpuProcess is one process tree whose CPU time a tier reports: webhookd, the Temporal server,
// PostgreSQL, or this loadtest (the receiver and the load generator).
type cpuProcess struct {
	name string
	pid  int // 0: this process
}

// cpuReading is the CPU time of each watched process tree at one moment.
type cpuReading map[string]time.Duration

// readCPU reads the CPU time of each process tree; a tree that cannot be read is left out.
func readCPU(procs []cpuProcess) cpuReading {
	r := cpuReading{}
	for _, p := range procs {
		pid := p.pid
		if pid == 0 {
			pid = os.Getpid()
		}
		if d, err := treeCPU("/proc", pid); err == nil {
			r[p.name] = d
		}
	}
	return r
}

// cpuPerDelivery formats the CPU time each tree spent between two readings, per delivery, in the
// order of procs: "webhookd 1.23 ms, temporal 2.34 ms, loadtest 0.50 ms".
func cpuPerDelivery(procs []cpuProcess, before, after cpuReading, n int) string {
	var parts []string
	var total time.Duration
	for _, p := range procs {
		b, okb := before[p.name]
		a, oka := after[p.name]
		if !okb || !oka || n == 0 {
			continue
		}
		total += a - b
		parts = append(parts, fmt.Sprintf("%s %.2f", p.name, float64(a-b)/float64(time.Millisecond)/float64(n)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (all %.2f)", float64(total)/float64(time.Millisecond)/float64(n))
}

// treeCPU is the CPU time, user and system, that process pid and its descendants have used: each
// live process's own time, plus the time of its children that have ended and been waited for
// (cutime, cstime), which no live process holds any more.
func treeCPU(proc string, pid int) (time.Duration, error) {
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

// procStat is what treeCPU needs of a /proc/<pid>/stat line.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime uint64
}

// readStats reads the stat line of every process under proc (normally /proc).
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
