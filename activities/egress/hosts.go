package egress

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// hosts keeps the per-host state of one Client: a circuit breaker, the exchanges in flight and an
// estimate of how long an exchange takes, from which refused requests get their appointments.
type hosts struct {
	concurrency     int
	breakerFailures int
	cooldown        time.Duration
	maxWait         time.Duration
	timeout         time.Duration
	now             func() time.Time
	log             *slog.Logger
	metrics         *metrics

	mu        sync.Mutex
	byKey     map[string]*host
	lastSweep time.Time
}

type breakerState int

const (
	closed   breakerState = iota
	open                  // failing fast until openUntil
	halfOpen              // one probe in flight, everyone else still fails fast
)

type host struct {
	key       string
	state     breakerState
	failures  int // counted failures in a row while closed
	openUntil time.Time
	inFlight  int
	// estimate is the moving average of an exchange's duration; tail is the latest appointment
	// given to a refused request.
	estimate time.Duration
	measured bool
	tail     time.Time
	lastUsed time.Time
}

// ticket is one admitted exchange, handed back to release.
type ticket struct {
	h       *host
	probe   bool
	started time.Time
}

// outcome is what an exchange says about its host.
type outcome int

const (
	// neutral says nothing about the host: our policy blocked it, the caller gave up, or the reply
	// broke a limit of ours.
	neutral outcome = iota
	// answered is any HTTP response, whatever its status: a host that answers fast holds nothing.
	answered
	// failed is a connection, DNS, TLS or network failure.
	failed
	// timedOut is a failure that held a slot for the whole timeout.
	timedOut
)

const (
	// defaultEstimate stands for an exchange's duration before any has completed.
	defaultEstimate = time.Second
	// estimateWeight is the weight of the latest exchange in the moving average: about the last
	// ten exchanges matter.
	estimateWeight = 0.2
	// idleAfter is how long an unused host with a closed breaker is remembered; forgetting it only
	// resets its estimate.
	idleAfter     = 10 * time.Minute
	sweepInterval = time.Minute
)

func newHosts(o Options, m *metrics) *hosts {
	return &hosts{
		concurrency: o.HostConcurrency, breakerFailures: o.BreakerFailures, cooldown: o.BreakerCooldown,
		maxWait: o.MaxWait, timeout: o.Timeout, now: o.Now, log: o.Logger, metrics: m,
		byKey: make(map[string]*host),
	}
}

// acquire admits an exchange with the host named key, or refuses it without a connection: first
// the breaker (an open one needs no slot), then a slot.
func (hs *hosts) acquire(key string) (ticket, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := hs.now()
	hs.sweep(now)
	h := hs.byKey[key]
	if h == nil {
		h = &host{key: key, estimate: defaultEstimate}
		hs.byKey[key] = h
	}
	h.lastUsed = now

	probe := false
	switch h.state {
	case open:
		if now.Before(h.openUntil) {
			hs.metrics.circuitOpen()
			return ticket{}, fmt.Errorf("%w: %s failed repeatedly; next try after %s", ErrCircuitOpen, key, h.openUntil.Format(time.RFC3339))
		}
		h.state, probe = halfOpen, true
	case halfOpen:
		hs.metrics.circuitOpen()
		return ticket{}, fmt.Errorf("%w: %s failed repeatedly; a probe is in flight", ErrCircuitOpen, key)
	}

	if h.inFlight >= hs.concurrency {
		if probe {
			// Exchanges from before the breaker opened still hold every slot; the next request
			// probes instead.
			h.state = open
		}
		hs.metrics.hostBusy()
		return ticket{}, &HostBusyError{RetryIn: hs.appointment(h, now)}
	}
	h.inFlight++
	return ticket{h: h, probe: probe, started: now}, nil
}

// appointment books the next free turn at the host for a refused request and returns how long
// until it. Turns are spaced by the time the host takes to free one slot (estimate/concurrency),
// so refused requests come back at about the rate the host can take them instead of all at once.
// Jitter stays within a tenth of that spacing so turns keep their order.
func (hs *hosts) appointment(h *host, now time.Time) time.Duration {
	spacing := h.estimate / time.Duration(hs.concurrency)
	at := h.tail
	if at.Before(now) {
		at = now
	}
	at = at.Add(spacing)
	wait := at.Sub(now)
	if wait > hs.maxWait {
		// Booked further out than anyone should wait: spread these over the second half of the
		// window without booking, so the tail stays within reach.
		return hs.maxWait/2 + rand.N(hs.maxWait/2+1)
	}
	h.tail = at
	if spacing >= 10 {
		wait += rand.N(spacing / 10)
	}
	return min(wait, hs.maxWait)
}

// release ends an admitted exchange and records what it said about the host.
func (hs *hosts) release(t ticket, o outcome) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := hs.now()
	h := t.h
	h.inFlight--
	h.lastUsed = now

	switch o {
	case answered, failed:
		h.observe(now.Sub(t.started))
	case timedOut:
		h.observe(hs.timeout)
	}

	switch o {
	case answered:
		h.failures = 0
		if h.state != closed {
			hs.close(h)
		}
	case failed, timedOut:
		switch {
		case t.probe && h.state == halfOpen:
			hs.open(h, now)
		case h.state == closed:
			h.failures++
			if h.failures >= hs.breakerFailures {
				hs.open(h, now)
			}
		}
		// Failures of exchanges that began before the breaker opened change nothing.
	default:
		if t.probe && h.state == halfOpen {
			// The probe learned nothing; the cool-down is over, so the next request probes.
			h.state = open
		}
	}
}

func (h *host) observe(d time.Duration) {
	if !h.measured {
		h.estimate, h.measured = d, true
		return
	}
	h.estimate = time.Duration(estimateWeight*float64(d) + (1-estimateWeight)*float64(h.estimate))
}

func (hs *hosts) open(h *host, now time.Time) {
	if h.state == closed {
		hs.metrics.circuitOpened()
		hs.log.Warn("receiver host circuit opened", "host", h.key, "failures", h.failures, "cooldown", hs.cooldown)
	} else {
		hs.log.Warn("receiver host probe failed; circuit stays open", "host", h.key, "cooldown", hs.cooldown)
	}
	h.state, h.openUntil, h.failures = open, now.Add(hs.cooldown), 0
}

func (hs *hosts) close(h *host) {
	hs.metrics.circuitClosed()
	hs.log.Info("receiver host circuit closed", "host", h.key)
	h.state, h.failures = closed, 0
}

// sweep forgets hosts unused for idleAfter so that the map does not grow with every host ever
// posted to. Hosts with an open breaker, exchanges in flight or booked appointments are kept.
func (hs *hosts) sweep(now time.Time) {
	if now.Sub(hs.lastSweep) < sweepInterval {
		return
	}
	hs.lastSweep = now
	for key, h := range hs.byKey {
		if h.state == closed && h.inFlight == 0 && now.Sub(h.lastUsed) > idleAfter && !h.tail.After(now) {
			delete(hs.byKey, key)
		}
	}
}

// judge reads what an exchange said about its host. ctx is the caller's: when it has ended, the
// caller gave up, which says nothing about the host.
func judge(ctx context.Context, err error) outcome {
	if err == nil {
		return answered
	}
	if ctx.Err() != nil {
		return neutral
	}
	switch class, _ := Classify(err); class {
	case ClassTimeout:
		return timedOut
	case ClassRefused, ClassDNS, ClassTLS, ClassNetwork:
		return failed
	}
	return neutral
}
