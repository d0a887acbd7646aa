package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/internal/proccpu"
)

// CPU time per delivery (issue 21): throughput moves with the machine's load, CPU time per unit of
// work much less. A process's CPU time is read from /proc/<pid>/stat, with that of its descendants
// (the Temporal dev server runs under a script; PostgreSQL's backends are the postmaster's
// children), so a tier's cost is the difference of two readings.

// cpuProcess is one process tree whose CPU time a tier reports: webhookd, the Temporal server,
// PostgreSQL, or this loadtest (the receiver and the load generator); or several trees counted as
// one, such as make cluster's two webhookd API replicas.
type cpuProcess struct {
	name string
	pids []int // the trees whose CPU time is summed under name; none: this process
	// split, when set, also reports the one tree's CPU time by child, as name/label (proccpu.ByChild):
	// PostgreSQL's by database.
	split func(cmdline string) string
}

// serverProcesses are the stack's processes whose ids were given: webhookd (-pid), webhookd's API
// and worker replicas of a cluster (-api-pids, -worker-pids), the Temporal server (-temporal-pid)
// and PostgreSQL (-postgres-pid).
func serverProcesses(cfg config) []cpuProcess {
	var procs []cpuProcess
	for _, p := range []cpuProcess{{"webhookd", onePID(cfg.pid), nil}, {"webhookd-api", cfg.apiPIDs, nil},
		{"webhookd-worker", cfg.workerPIDs, nil}, {"temporal", onePID(cfg.temporalPID), nil}, {"postgres", onePID(cfg.postgresPID), postgresDatabase}} {
		if len(p.pids) > 0 {
			procs = append(procs, p)
		}
	}
	return procs
}

// postgresDatabase labels a PostgreSQL backend by its database, from the command line the
// backend sets ("postgres: <user> <database> <client> <activity>"), so that Temporal's, its
// visibility's and webhookd's shares of the server's CPU are apart; everything else (the postmaster,
// its background processes, the backends that ended) is "other".
func postgresDatabase(cmdline string) string {
	f := strings.Fields(cmdline)
	if len(f) >= 4 && f[0] == "postgres:" && strings.Contains(f[3], "(") {
		return f[2]
	}
	return "other"
}

// onePID is a flag's one process id as a list: none when it was not given.
func onePID(pid int) []int {
	if pid > 0 {
		return []int{pid}
	}
	return nil
}

// parsePIDs parses a comma-separated list of process ids ("" is none).
func parsePIDs(flagName, s string) ([]int, error) {
	var pids []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("-%s %q: want process ids separated by commas", flagName, s)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// cpuReading is the CPU time of each watched process tree at one moment.
type cpuReading map[string]time.Duration

// readCPU reads the CPU time of each process tree; a tree that cannot be read is left out, and so
// is a group of trees of which one cannot be read (a replica restarted under another pid).
func readCPU(procs []cpuProcess) cpuReading {
	r := cpuReading{}
	for _, p := range procs {
		pids := p.pids
		if len(pids) == 0 {
			pids = []int{os.Getpid()}
		}
		var sum time.Duration
		read := true
		for _, pid := range pids {
			d, err := proccpu.Tree("/proc", pid)
			if err != nil {
				read = false
				break
			}
			sum += d
		}
		if !read {
			continue
		}
		r[p.name] = sum
		if p.split != nil && len(pids) == 1 {
			if parts, err := proccpu.ByChild("/proc", pids[0], p.split); err == nil {
				for label, d := range parts {
					if label == "" {
						label = "other"
					}
					r[p.name+"/"+label] += d
				}
			}
		}
	}
	return r
}

// cpuCost is the CPU time each watched tree spent on a tier, per delivery, in milliseconds, in the
// order of the processes watched.
type cpuCost struct {
	names []string
	ms    []float64
}

// cpuPerDelivery is the CPU time each tree spent between two readings, per delivery; a tree read
// only once is left out.
func cpuPerDelivery(procs []cpuProcess, before, after cpuReading, n int) cpuCost {
	var c cpuCost
	for _, p := range procs {
		b, okb := before[p.name]
		a, oka := after[p.name]
		if !okb || !oka || n == 0 {
			continue
		}
		c.names = append(c.names, p.name)
		c.ms = append(c.ms, float64(a-b)/float64(time.Millisecond)/float64(n))
		if p.split == nil {
			continue
		}
		var parts []string
		for name := range after {
			if _, ok := before[name]; ok && strings.HasPrefix(name, p.name+"/") {
				parts = append(parts, name)
			}
		}
		slices.Sort(parts)
		for _, name := range parts {
			c.names = append(c.names, name)
			c.ms = append(c.ms, float64(after[name]-before[name])/float64(time.Millisecond)/float64(n))
		}
	}
	return c
}

// isPart tells a share of a tree (postgres/webhookd) from a tree: total counts only the trees.
func isPart(name string) bool { return strings.Contains(name, "/") }

// of is the CPU time per delivery of the named tree, 0 when it was not read.
func (c cpuCost) of(name string) float64 {
	ms, _ := c.lookup(name)
	return ms
}

// lookup is the CPU time per delivery of the named tree, and whether it was read.
func (c cpuCost) lookup(name string) (float64, bool) {
	for i, n := range c.names {
		if n == name {
			return c.ms[i], true
		}
	}
	return 0, false
}

// total is the CPU time per delivery of every tree read.
func (c cpuCost) total() float64 {
	var t float64
	for i, ms := range c.ms {
		if !isPart(c.names[i]) {
			t += ms
		}
	}
	return t
}

// String formats the cost: "webhookd 1.23, temporal 2.34, loadtest 0.50 (all 4.07)", or "-".
func (c cpuCost) String() string {
	if len(c.names) == 0 {
		return "-"
	}
	parts := make([]string, len(c.names))
	for i, n := range c.names {
		parts[i] = fmt.Sprintf("%s %.2f", n, c.ms[i])
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (all %.2f)", c.total())
}

// cpuMeter measures the CPU time the watched trees spend over a window of a run, beside the useful
// work done in it, which the caller counts (in sharedhost: B's requests that reached the hanging
// receiver).
type cpuMeter struct {
	procs []cpuProcess
	start time.Time
	cpu   cpuReading
	work  int64
}

// startCPUMeter starts a window; work is the caller's count now.
func startCPUMeter(procs []cpuProcess, work int64) cpuMeter {
	return cpuMeter{procs: procs, start: time.Now(), cpu: readCPU(procs), work: work}
}

// window ends the measurement; work is the caller's count now.
func (m cpuMeter) window(name string, work int64) cpuWindow {
	w, _ := m.lap(name, work)
	return w
}

// lap is window, and a meter that starts where the window ends: for progress lines, each on the
// time since the one before.
func (m cpuMeter) lap(name string, work int64) (cpuWindow, cpuMeter) {
	next := cpuMeter{procs: m.procs, start: time.Now(), cpu: readCPU(m.procs), work: work}
	return cpuWindow{name: name, length: next.start.Sub(m.start), work: work - m.work,
		spent: cpuPerDelivery(m.procs, m.cpu, next.cpu, 1)}, next
}

// cpuWindow is the CPU time each watched tree spent over a window of a run, and the units of useful
// work done in it.
type cpuWindow struct {
	name   string
	length time.Duration
	work   int64
	spent  cpuCost // ms over the whole window
}

// of formats the named tree's CPU time as a share of one core over the window, with its ms per unit
// of work when there was any: "33.0% (137.5 ms)", "2.1%"; "-" when the tree was not read.
func (w cpuWindow) of(name string) string {
	ms, ok := w.spent.lookup(name)
	if !ok {
		return "-"
	}
	return w.format(ms)
}

// all is of for every tree read together.
func (w cpuWindow) all() string {
	if len(w.spent.names) == 0 {
		return "-"
	}
	return w.format(w.spent.total())
}

func (w cpuWindow) format(ms float64) string {
	if w.length <= 0 {
		return "-"
	}
	s := fmt.Sprintf("%.1f%%", ms/(float64(w.length)/float64(time.Millisecond))*100)
	if w.work > 0 {
		s += fmt.Sprintf(" (%.1f ms)", ms/float64(w.work))
	}
	return s
}
