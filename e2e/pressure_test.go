//go:build e2e && pressure

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/internal/proccpu"
)

// The system test of a shared host under CPU pressure runs with `make bench-pressure`, not in make
// test (issue 42: its figures are CPU and latency ratios, a benchmark's, and its judged count, held
// attempts coming back once per turn, is judged in make test by egress.TestHeldExchangeWokenOncePerTurn
// and workflows.TestDeliveryWorkflowHeldFirstAttemptSleepsToItsTurn). The pressure tag adds it.

// TestSharedHostIsolationUnderCPUPressure is issue 27's shared host with the CPU busy: account B's
// 100 endpoints on one host hang (10 events, 1,000 deliveries), account C's healthy endpoint is on
// the same host, and busy processes compete with the stack for the cores. A held backlog must cost
// nothing while it waits: before, each held attempt came back every 30-60 s to book its turn
// again, and the issue saw 1,000 of them cost the Temporal server and the worker 150-180 ms of CPU
// per attempt that reached the receiver, and C's delivery queue behind that churn when the cores
// were taken (10.2 s against 0.23 s with B idle). Measured within the run, once B's deliveries have
// all started: how often the held backlog came back (holds and waits in the worker) per attempt of
// B's that reached the receiver, which failed before (8.8 for each, against 2.5 after); the CPU the
// stack (this process, which runs webhookd, and the Temporal server under it) spent per such
// attempt, against what one of C's deliveries costs; and C's worst event-to-receipt under the
// pressure while B's backlog is held, against its worst under the same pressure with B idle. The
// test judges the count (held attempts come back once per turn); it logs the two ratios, which the
// benchmark judges (make bench-isolation SCENARIO=sharedhost).
func TestSharedHostIsolationUnderCPUPressure(t *testing.T) {
	const timeout = 5 * time.Second
	asks := &firstAsks{by: map[string]*asked{}, sleepsOver: activities.AttemptBudget{Timeout: timeout}.Attempt()}
	// Failed attempts retry after 10 minutes, beyond the test's end: with the cores taken, B's first
	// attempts can take a minute and a half to be made, and a shorter schedule brought their
	// retries into the measured window, each a new attempt and hold that the held backlog did not
	// cause (a failed run: 6.0 times a plain delivery's CPU per attempt; two runs with the retries
	// out of the window: 2.3 and 1.9 times).
	st := newStack(t, stackOptions{allowPrivate: true, timeout: timeout, schedule: []time.Duration{10 * time.Minute},
		interceptors: []interceptor.ClientInterceptor{asks}})
	hang, _, noisy, healthy := startSharedHostAccounts(t, st)
	st.receipt(t, "/ok", healthy) // the stack warm

	// What one plain delivery costs, B idle.
	const plain = 20
	cpu := stackCPU(t)
	for range plain {
		st.receipt(t, "/ok", healthy)
	}
	perDelivery := (stackCPU(t) - cpu) / plain

	busy(t, 3)
	const probes = 4
	// worst is C's worst of probes receipts, every apart.
	worst := func(phase string, every time.Duration) time.Duration {
		var all []time.Duration
		for i := range probes {
			if i > 0 {
				time.Sleep(every) // probes spread over the held backlog's life, not a wait for async work
			}
			_, d := st.receipt(t, "/ok", healthy)
			all = append(all, d)
		}
		t.Logf("C's event-to-receipt under CPU pressure, %s: %v", phase, all)
		return slices.Max(all)
	}
	idle := worst("B idle", time.Second)

	// The backlog's size is what the count judged below can see: an attempt that reaches the
	// receiver is one of 12 on B's share of the host, about 48 in the 20 s measured, whatever the
	// backlog, while held attempts that came back to book again did so in proportion to the
	// backlog (420 holds for 48 attempts with 1,000; about a third of that with 300, too few to
	// tell from the 2.5 each seen after the fix).
	const backlog = 1000
	for range backlog / 100 {
		noisy.publish(t, "A", "campaign.created", campaign)
	}
	// B's 1,000 deliveries start (by fan-out), fill B's share of the host and are held back: each
	// first attempt (a local activity) is held, and asks again as a regular activity, at once when
	// its turn is near, otherwise after sleeping until it (asks.sleepsOver). Held attempts came back to book again from 30 s on (their
	// appointments were spread over the second half of a minute): the backlog is measured from
	// then, and once every one of B's deliveries has made its first asks, over 20 s with C quiet,
	// then C's probes go, 3 s apart. With the cores taken, the first asks of 1,000 workflows can
	// take longer than that half minute: made inside the window, two holds each, they were counted
	// as the backlog coming back (352 holds for 48 attempts in a run where 134 were still to ask).
	eventually(t, 5*time.Minute, "B's deliveries all started", func() bool { return st.startsBy(t, "fanout") >= backlog })
	settle := time.Now()
	eventually(t, time.Minute, "the held backlog's first half minute", func() bool { return time.Since(settle) > 30*time.Second })
	t.Logf("%d of B's %d deliveries had made their first asks 30 s after they all started", asks.settled(healthy), backlog)
	eventually(t, 3*time.Minute, "B's deliveries all made their first asks", func() bool { return asks.settled(healthy) >= backlog })
	t.Logf("B's deliveries all made their first asks %v after they all started", time.Since(settle).Round(time.Second))
	cpu, before, waits := stackCPU(t), hangRequests(hang), st.counter(t, "webhookd_egress_waits_total")
	window := time.Now()
	eventually(t, time.Minute, "20 s of the held backlog", func() bool { return time.Since(window) > 20*time.Second })
	spent, useful, waited := stackCPU(t)-cpu, hangRequests(hang)-before, st.counter(t, "webhookd_egress_waits_total")-waits
	if useful == 0 {
		t.Fatal("none of B's attempts reached the receiver in 20 s")
	}
	perUseful := spent / time.Duration(useful)
	t.Logf("B's held backlog: %.0f holds and waits in the worker for %d attempts that reached the receiver: %.1f each", waited, useful, waited/float64(useful))
	for _, reason := range []string{"host_cap", "endpoint_cap", "rate_limit", "breaker"} {
		t.Logf("  by %s: %.0f in all", reason, st.counter(t, "webhookd_egress_waits_total", "reason", reason))
	}
	t.Logf("  attempts by outcome in all: %v", st.outcomes(t))
	t.Logf("B's held backlog: %v of CPU in %v (%.0f%% of a core), %d attempts reached the receiver: %v per attempt; a plain delivery of C: %v (%.1f times)",
		spent.Round(time.Millisecond), time.Since(window).Round(time.Millisecond), 100*spent.Seconds()/time.Since(window).Seconds(), useful,
		perUseful.Round(100*time.Microsecond), perDelivery.Round(100*time.Microsecond), float64(perUseful)/float64(perDelivery))
	loaded := worst("B's deliveries held on the host", 3*time.Second)
	t.Logf("C's worst under CPU pressure: %v with B hanging, %v with B idle (%.1f times)", loaded, idle, float64(loaded)/float64(idle))

	// An attempt of B's that reaches the receiver was held once (it asked, and was given a turn),
	// and waited once in the worker (it came back for its turn and waited for the slot to free);
	// some come back to a slot that is not free yet and are held once more. Held attempts that
	// came back to book again, as they did every 30-60 s before, made many more: 420 for 48.
	if perAttempt := waited / float64(useful); perAttempt > 5 {
		t.Errorf("B's held backlog was held or waited %.0f times for %d attempts that reached the receiver, %.1f each: held attempts come back more than once per turn",
			waited, useful, perAttempt)
	}
	// What an attempt of B's that reaches the receiver costs in CPU, against a plain delivery of C's,
	// and C's worst receipt with B's backlog held against B idle, are logged above and are not
	// judged here: ratios of CPU and latency are the benchmark's (`make bench-isolation
	// SCENARIO=sharedhost ARGS='-pressure 3 -steady 20s'` prints both), since a shared CI machine
	// moves them more than a defect would (issue 42, point 5).
}

// stackCPU is the CPU time of this process (the stack's webhookd: API, worker, receivers) and its
// descendants (the Temporal dev server), but not the busy processes, which are not its children.
func stackCPU(t *testing.T) time.Duration {
	t.Helper()
	d, err := proccpu.Tree("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// outcomes counts the stack's attempts by outcome (webhookd_deliveries_total).
func (st *stack) outcomes(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, o := range []string{"delivered", "timeout", "circuit_open", "http_status", "refused", "network"} {
		if n := st.counter(t, "webhookd_deliveries_total", "outcome", o); n > 0 {
			out[o] = n
		}
	}
	return out
}

// startsBy is how many delivery workflows the stack started by way (webhookd_delivery_starts_total).
func (st *stack) startsBy(t *testing.T, by string) float64 {
	return st.counter(t, "webhookd_delivery_starts_total", "by", by)
}

func hangRequests(h *hangingReceiver) int {
	n, _ := h.stats()
	return n
}

// firstAsks watches a stack's Deliver activities, by workflow, to tell when each delivery has made
// its first asks for a turn: its first attempt reached the receiver, or (held back, as a local
// activity) it asked again as a regular activity, or it sleeps until its turn, which was further
// out than sleepsOver (what a regular attempt may wait in the worker).
type firstAsks struct {
	interceptor.InterceptorBase
	sleepsOver time.Duration
	mu         sync.Mutex
	by         map[string]*asked
}

type asked struct {
	runs     int
	reached  bool
	sleeping bool
}

func (f *firstAsks) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &askWatch{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, f: f}
}

// settled is how many deliveries, but those to webhook skip, have made their first asks.
func (f *firstAsks) settled(skip int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for id, a := range f.by {
		if !strings.HasSuffix(id, fmt.Sprintf(":%d", skip)) && (a.reached || a.runs >= 2 || a.sleeping) {
			n++
		}
	}
	return n
}

type askWatch struct {
	interceptor.ActivityInboundInterceptorBase
	f *firstAsks
}

func (w *askWatch) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := w.Next.ExecuteActivity(ctx, in)
	info := activity.GetInfo(ctx)
	if res, ok := out.(activities.DeliverResult); ok && err == nil && info.ActivityType.Name == "Deliver" {
		w.f.mu.Lock()
		a := w.f.by[info.WorkflowExecution.ID]
		if a == nil {
			a = &asked{}
			w.f.by[info.WorkflowExecution.ID] = a
		}
		a.runs++
		a.reached = a.reached || !res.HostBusy
		a.sleeping = a.sleeping || info.IsLocalActivity && res.HostBusy && res.RetryIn > w.f.sleepsOver
		w.f.mu.Unlock()
	}
	return out, err
}
