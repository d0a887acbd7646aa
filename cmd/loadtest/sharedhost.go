package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// sharedHost is issue 17's experiment: accounts B and C on one receiver host and port. C's one
// webhook answers at once; B's never answer. C publishes on the idle stack, then B publishes and,
// once any breaker on the host has had time to open (cfg.pause), C publishes again. It reports
// C's event-to-receipt, failed attempts and webhook status per phase beside B's hang time: guards
// keyed by host alone make C pay for B's receiver.
//
// Issue 27 adds two measurements. With cfg.pressure busy processes, C probes once more in each
// state, beside them: isolation holds only while the CPU has room. With the stack's process ids
// (-pid, -temporal-pid) and cfg.steady, it measures the CPU of B's held backlog: each process's
// share of a core and its CPU time per useful attempt (a request of B's that reached the hanging
// receiver) over a window of cfg.steady after the pause, while C is quiet, beside B's start (its
// publish and the pause) and an idle window of the same length before B publishes.
func sharedHost(ctx context.Context, cfg config, cert tls.Certificate) error {
	s, held, err := setUpSharedHost(ctx, cfg, cert, orDefault(cfg.noisyHooks, 100))
	if err != nil {
		return err
	}
	defer s.tearDown(ctx)
	r := &sharedHostRun{cfg: cfg, s: s, held: held, procs: serverProcesses(cfg)}
	r.measureCPU = len(r.procs) > 0 && cfg.steady > 0
	if err := r.run(ctx); err != nil {
		return err
	}
	return r.report(ctx)
}

// sharedHostRun is one run of the sharedhost scenario: its stage, and what it has measured so far.
type sharedHostRun struct {
	cfg        config
	s          *stage
	held       *holdTimer
	procs      []cpuProcess // the stack's processes whose CPU is measured
	measureCPU bool

	phases  []sharedHostPhase
	windows []cpuWindow
	// C's probes with B idle and with B hanging, on the machine as it is and beside cfg.pressure
	// busy processes (zero without).
	idle, idlePressed, hanging, hangingPressed summary
}

// sharedHostPhase is one round of C's probes.
type sharedHostPhase struct {
	name string
	pubs []publication
	c    summary
}

// run probes with B idle, measures the idle stack's CPU, lets B publish, waits out the pause (B's
// start), measures B's steady state, and probes again with B hanging.
func (r *sharedHostRun) run(ctx context.Context) error {
	var err error
	if r.idle, r.idlePressed, err = r.probes(ctx, "B idle"); err != nil {
		return err
	}
	if err := r.quiet(ctx, "idle, before B publishes"); err != nil {
		return err
	}
	fmt.Printf("\nB publishes %d events to its %d webhooks\n", r.cfg.noisyEvents, len(r.s.bHooks))
	start := startCPUMeter(r.procs, r.s.hanging.total.Load())
	if err := r.s.publishNoisy(ctx, r.cfg.noisyEvents); err != nil {
		return err
	}
	fmt.Printf("  waiting %s for any breaker on the host to open\n", r.cfg.pause)
	if err := r.wait(ctx, r.cfg.pause); err != nil {
		return err
	}
	if r.measureCPU {
		r.windows = append(r.windows, start.window("B's start: its publish and the pause", r.s.hanging.total.Load()))
	}
	if err := r.quiet(ctx, "B's steady state"); err != nil {
		return err
	}
	r.hanging, r.hangingPressed, err = r.probes(ctx, "B hanging")
	return err
}

// probe publishes one phase of C's probes and keeps their receipts.
func (r *sharedHostRun) probe(ctx context.Context, name string) (summary, error) {
	fmt.Printf("\nphase %q: C publishes %d events, one every %s\n", name, r.cfg.probes, r.cfg.probeEvery)
	pubs, o, err := r.s.probe(ctx, r.cfg)
	if err != nil {
		return summary{}, err
	}
	p := sharedHostPhase{name: name, pubs: pubs, c: summarize(o)}
	r.phases = append(r.phases, p)
	return p.c, ctx.Err()
}

// probes runs C's probes on the machine as it is, then beside cfg.pressure busy processes, and
// returns both phases' summaries (the second zero without pressure).
func (r *sharedHostRun) probes(ctx context.Context, name string) (plain, pressed summary, err error) {
	if plain, err = r.probe(ctx, name); err != nil || r.cfg.pressure == 0 {
		return plain, summary{}, err
	}
	p, err := startPressure(r.cfg.pressure)
	if err != nil {
		return summary{}, summary{}, err
	}
	defer p.stop()
	fmt.Printf("\n%d busy processes started (pids %v), each spinning on one core\n", r.cfg.pressure, p.pids())
	pressed, err = r.probe(ctx, fmt.Sprintf("%s, %d busy processes", name, r.cfg.pressure))
	return plain, pressed, err
}

// wait waits d, C quiet, with progress lines that give, when the CPU is measured, each process's
// CPU since the line before: how it settles after B's publish.
func (r *sharedHostRun) wait(ctx context.Context, d time.Duration) error {
	lap := startCPUMeter(r.procs, r.s.hanging.total.Load())
	pollUntil(ctx, time.Now().Add(d), r.cfg.progress, func() bool { return false }, func() {
		line := fmt.Sprintf("  %s; %s", r.s.hanging, r.held)
		if r.measureCPU {
			var w cpuWindow
			w, lap = lap.lap("", r.s.hanging.total.Load())
			line += "; " + cpuProgress(w)
		}
		fmt.Println(line)
	})
	return ctx.Err()
}

// quiet measures the CPU over a window of cfg.steady in which C publishes nothing; without the
// processes' ids it does nothing.
func (r *sharedHostRun) quiet(ctx context.Context, name string) error {
	if !r.measureCPU {
		return nil
	}
	fmt.Printf("\nwindow %q: %s, C quiet, CPU of %s\n", name, r.cfg.steady, cpuProcessNames(r.procs))
	m := startCPUMeter(r.procs, r.s.hanging.total.Load())
	err := r.wait(ctx, r.cfg.steady)
	r.windows = append(r.windows, m.window(name, r.s.hanging.total.Load()))
	return err
}

// report prints the run's figures as one paragraph, with C's deliveries and webhook status as the
// API reports them.
func (r *sharedHostRun) report(ctx context.Context) error {
	ds, err := r.s.c.deliveries(ctx, r.s.cHook)
	if err != nil {
		return fmt.Errorf("account C's deliveries: %w", err)
	}
	status, err := r.s.c.webhookStatus(ctx, r.s.cHook)
	if err != nil {
		return fmt.Errorf("account C's webhook: %w", err)
	}

	missing, err := r.printPhases(ds)
	if err != nil {
		return err
	}
	verdict := "healthy"
	if status != "processing" {
		verdict = "NOT healthy: want processing"
	}
	fmt.Printf("C's webhook at the end: %s (%s)\n", status, verdict)
	fmt.Printf("B's hang: %d requests reached the receiver, %s\n", r.s.hanging.total.Load(), r.held)
	if r.measureCPU {
		if err := printCPUWindows(os.Stdout, r.procs, r.windows); err != nil {
			return err
		}
	}
	if missing > 0 {
		return &incompleteError{missing: missing, waited: r.cfg.timeout}
	}
	return nil
}

// printPhases prints C's event-to-receipt per phase, and its worst with B hanging over its worst
// with B idle, as the machine is and under pressure. It returns how many of C's events had not
// arrived.
func (r *sharedHostRun) printPhases(ds []delivery) (int, error) {
	cfg := r.cfg
	fmt.Printf("\naccount C's event-to-receipt, %d events per phase one every %s, on the host and port of B's %d hanging webhooks (not arrived: within %s of the phase's last publish):\n",
		cfg.probes, cfg.probeEvery, len(r.s.bHooks), cfg.timeout)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tevents\tp50\tp99\tmax\tnot arrived\tfailed attempts")
	missing := 0
	for _, p := range r.phases {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", p.name, p.c.events, p.c.p50, p.c.p99, p.c.max, p.c.missing, failedAttempts(ds, p.pubs))
		missing += p.c.missing
	}
	if err := tw.Flush(); err != nil {
		return 0, err
	}
	fmt.Printf("C's worst, B hanging over B idle: %s (%s against %s)", ratio(r.hanging.max, r.idle.max), r.hanging.max, r.idle.max)
	if cfg.pressure > 0 {
		fmt.Printf("; beside %d busy processes %s (%s against %s; p50 %s against %s)", cfg.pressure,
			ratio(r.hangingPressed.max, r.idlePressed.max), r.hangingPressed.max, r.idlePressed.max, r.hangingPressed.p50, r.idlePressed.p50)
	}
	fmt.Println()
	return missing, nil
}

// printCPUWindows prints the CPU of each window as a share of a core, with the CPU time per useful
// attempt in brackets: B's requests that reached the hanging receiver in the window. It has no
// blank line, so that it stays in the report's last paragraph (what bench-isolation.sh prints).
func printCPUWindows(w io.Writer, procs []cpuProcess, windows []cpuWindow) error {
	fmt.Fprintln(w, "CPU in % of one core (ms of CPU per useful attempt: a request of B's that reached the hanging receiver in the window):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "window\tlength\tB's requests"
	for _, p := range procs {
		header += "\t" + p.name
	}
	fmt.Fprintln(tw, header+"\tall")
	for _, win := range windows {
		row := fmt.Sprintf("%s\t%.1f s\t%d", win.name, win.length.Seconds(), win.work)
		for _, p := range procs {
			row += "\t" + win.of(p.name)
		}
		fmt.Fprintln(tw, row+"\t"+win.all())
	}
	return tw.Flush()
}

// cpuProgress is a window's CPU for a progress line: "over 5 s, 12 of B's requests: webhookd 2.3%
// (9.4 ms), temporal 10.4% (43.5 ms)".
func cpuProgress(w cpuWindow) string {
	parts := make([]string, len(w.spent.names))
	for i, n := range w.spent.names {
		parts[i] = n + " " + w.of(n)
	}
	return fmt.Sprintf("over %.0f s, %d of B's requests: %s", w.length.Seconds(), w.work, strings.Join(parts, ", "))
}

// cpuProcessNames is "webhookd (pid 12), temporal (pid 34)".
func cpuProcessNames(procs []cpuProcess) string {
	parts := make([]string, len(procs))
	for i, p := range procs {
		ids := make([]string, len(p.pids))
		for j, pid := range p.pids {
			ids[j] = strconv.Itoa(pid)
		}
		label := "pid"
		if len(ids) > 1 {
			label = "pids"
		}
		parts[i] = fmt.Sprintf("%s (%s %s)", p.name, label, strings.Join(ids, ","))
	}
	return strings.Join(parts, ", ")
}

// setUpSharedHost starts one receiver that serves C's webhook at /ok and B's at /hang/<i>, so that
// webhookd sees a single host and port for both accounts, and registers the webhooks. The
// holdTimer it returns times B's requests.
func setUpSharedHost(ctx context.Context, cfg config, cert tls.Certificate, noisyHooks int) (*stage, *holdTimer, error) {
	s := newStage(cfg)
	held := &holdTimer{next: s.hanging}
	mux := http.NewServeMux()
	mux.Handle("/ok", s.healthy)
	mux.Handle("/hang/", held)
	addr, stop, err := serveTLS(cfg.listen, cert, mux)
	if err != nil {
		return nil, nil, fmt.Errorf("receiver: %w", err)
	}
	s.stops = append(s.stops, stop)

	base := "https://" + addr
	if s.cHook, err = s.c.createWebhook(ctx, base+"/ok"); err != nil {
		s.tearDown(ctx)
		return nil, nil, fmt.Errorf("account C (-key): %w", err)
	}
	ids, err := registerWebhooks(ctx, cfg, s.b, "B", noisyHooks, func(i int) string { return fmt.Sprintf("%s/hang/%d", base, i) })
	s.bHooks = registered(ids)
	if err != nil {
		s.tearDown(ctx)
		return nil, nil, fmt.Errorf("account B (-noisy-key): %w", err)
	}
	fmt.Printf("account C: webhook %d at %s/ok (answers 204 at once)\n", s.cHook, base)
	fmt.Printf("account B: %d webhooks at %s/hang/... (reads the request, never answers)\n", noisyHooks, base)
	return s, held, nil
}

// holdTimer times how long its handler held each request. Around the hanging receiver that is how
// long webhookd waited for an answer before it hung up: its delivery timeout, seen from the
// receiver.
type holdTimer struct {
	next http.Handler
	mu   sync.Mutex
	held []obs
}

func (t *holdTimer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.next.ServeHTTP(w, r)
	t.mu.Lock()
	t.held = append(t.held, obs{d: time.Since(start)})
	t.mu.Unlock()
}

// String summarizes the holds that have ended, for progress lines and the report.
func (t *holdTimer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) == 0 {
		return "none held to its end yet"
	}
	s := summarize(t.held)
	return fmt.Sprintf("%d held until webhookd hung up: min %s, p50 %s, max %s",
		s.events, slices.MinFunc(t.held, func(a, b obs) int { return cmp.Compare(a.d, b.d) }), s.p50, s.max)
}

// failedAttempts counts the failed attempts of the deliveries of pubs' events, with their error
// classes: "0", or "12 (circuit_open 10, timeout 2)".
func failedAttempts(ds []delivery, pubs []publication) string {
	events := make(map[int64]bool, len(pubs))
	for _, p := range pubs {
		events[p.eventID] = true
	}
	n, byClass := 0, map[string]int{}
	for _, d := range ds {
		if !events[d.EventID] {
			continue
		}
		for _, a := range d.AttemptLog {
			if !a.failed() {
				continue
			}
			n++
			switch {
			case a.ErrorClass != nil:
				byClass[*a.ErrorClass]++
			case a.StatusCode != nil:
				byClass[fmt.Sprintf("HTTP %d", *a.StatusCode)]++
			default:
				byClass["unclassified"]++
			}
		}
	}
	if n == 0 {
		return "0"
	}
	var parts []string
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		parts = append(parts, fmt.Sprintf("%s %d", class, byClass[class]))
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}
