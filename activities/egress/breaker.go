package egress

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrCircuitOpen is wrapped by the error of an exchange refused, without a connection, because a
// breaker is open: its endpoint's, after BreakerFailures timeouts, broken connections or failed TLS
// handshakes of that endpoint in a row, or its host's, after BreakerFailures refused connections or
// DNS failures in a row. Either way the
// failure is the exchange's own: its endpoint failed, or its host is unreachable for every path.
var ErrCircuitOpen = errors.New("circuit open")

// Breaker scopes, also the values of the metrics' scope label.
const (
	scopeHost     = "host"
	scopeEndpoint = "endpoint"
)

// CircuitOpenError is the error of an exchange refused by an open breaker. It matches
// ErrCircuitOpen with errors.Is.
type CircuitOpenError struct {
	// Scope is "endpoint" or "host".
	Scope string
	Until time.Time
}

func (e *CircuitOpenError) Error() string {
	if e.Scope == scopeHost {
		return fmt.Sprintf("circuit open: the receiver's host refused connections or failed DNS repeatedly; next try after %s", e.Until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("circuit open: this endpoint timed out, broke the connection or failed its TLS handshake repeatedly; next try after %s", e.Until.UTC().Format(time.RFC3339))
}

func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

type breakerState int

const (
	closed   breakerState = iota
	open                  // failing fast until openUntil
	halfOpen              // one probe in flight; the others wait for its outcome
)

// breaker is the state of one host's or one endpoint's circuit breaker. Guarded by hosts.mu.
type breaker struct {
	state     breakerState
	failures  int // counted failures in a row while closed
	openUntil time.Time
}

// admitBreaker lets an exchange past b: at once when b is closed; as the probe when its cool-down
// is over; with an error wrapping ErrCircuitOpen while it is open; and held back (HeldByBreaker)
// while another exchange probes, since that probe's outcome decides.
func (hs *hosts) admitBreaker(b *breaker, scope string, h *host, now time.Time) (probe bool, err error) {
	switch b.state {
	case open:
		if now.Before(b.openUntil) {
			hs.metrics.circuitOpen(scope)
			return false, &CircuitOpenError{Scope: scope, Until: b.openUntil}
		}
		b.state = halfOpen
		return true, nil
	case halfOpen:
		hs.metrics.held(HeldByBreaker, 0)
		retryIn := h.estimate + rand.N(h.estimate/10+1)
		return false, &HeldError{Reason: HeldByBreaker, Host: h.key, RetryIn: min(retryIn, hs.maxWait)}
	}
	return false, nil
}

// success records an exchange that says the breaker's subject works.
func (hs *hosts) success(b *breaker, scope, name string) {
	b.failures = 0
	if b.state != closed {
		hs.metrics.circuitClosed(scope)
		hs.log.Info("receiver circuit closed", "scope", scope, "receiver", name)
		b.state = closed
	}
}

// failure records an exchange that failed because of the breaker's subject.
func (hs *hosts) failure(b *breaker, scope, name string, probe bool, now time.Time) {
	switch {
	case probe && b.state == halfOpen:
		hs.log.Warn("receiver probe failed; circuit stays open", "scope", scope, "receiver", name, "cooldown", hs.cooldown)
		b.state, b.openUntil, b.failures = open, now.Add(hs.cooldown), 0
	case b.state == closed:
		b.failures++
		if b.failures >= hs.breakerFailures {
			hs.metrics.circuitOpened(scope)
			hs.log.Warn("receiver circuit opened", "scope", scope, "receiver", name, "failures", b.failures, "cooldown", hs.cooldown)
			b.state, b.openUntil, b.failures = open, now.Add(hs.cooldown), 0
		}
	}
	// Failures of exchanges that began before the breaker opened change nothing.
}

// inconclusive records a probe that learned nothing (the caller gave up, or it was never made):
// the cool-down is over, so the next exchange probes.
func (hs *hosts) inconclusive(b *breaker, probe bool, now time.Time) {
	if probe && b.state == halfOpen {
		b.state, b.openUntil = open, now
	}
}
