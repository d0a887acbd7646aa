package egress

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// The egress proxy is the operator's, not a receiver's: when it fails whatever receiver it is
// asked for (ProxyError.outage: it cannot be reached, its TLS fails, it breaks the connection
// without an answer, it refuses our credentials), no receiver was reached, and the attempt is
// held, not failed (issue 41). Its answers about one receiver (a refusal by its rules, no answer
// while it waits on the receiver) fail that attempt alone, so that no account's receiver can make
// the proxy look down for the others. A held attempt keeps its
// place in its delivery's schedule, so an outage of the proxy exhausts no delivery, moves no
// webhook to failing, notifies no owner, and counts toward no auto-disable, however long it lasts;
// the operator is told instead (webhookd_egress_proxy_up, the WebhookdEgressProxyDown alert, and
// the log). While the proxy is down, one exchange at a time probes it, after a pause that doubles
// from proxyPauseMin to proxyPauseMax; the others are held without a connection, with an
// appointment spread over the pause after the next probe.
const (
	proxyPauseMin = time.Second
	proxyPauseMax = 30 * time.Second
)

// proxyGate is the state of the egress proxy as this process sees it. A nil *proxyGate (no proxy
// configured) admits everything and costs nothing.
type proxyGate struct {
	name    string
	now     func() time.Time
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	down    bool
	pause   time.Duration // the pause after the last failure while down
	until   time.Time     // no probe before this
	probing bool          // a probe is in flight
}

func newProxyGate(name string, o Options, m *metrics) *proxyGate {
	return &proxyGate{name: name, now: o.Now, log: o.Logger, metrics: m}
}

// admit lets an exchange through the gate: at once while the proxy is up; as the probe once its
// pause is over; otherwise it is held back (HeldByProxy) with an appointment after the next probe.
func (g *proxyGate) admit() (probe bool, err error) {
	if g == nil {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return false, nil
	}
	now := g.now()
	if g.probing || now.Before(g.until) {
		return false, g.held(now, nil)
	}
	g.probing = true
	return true, nil
}

// observe records what an exchange admitted by the gate learned of the proxy, and returns err, or
// in place of a failure of the proxy itself a *HeldError that holds the exchange back.
func (g *proxyGate) observe(ctx context.Context, probe bool, err error) error {
	if g == nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	var pe *ProxyError
	proxyFailed := errors.As(err, &pe)
	switch {
	case proxyFailed && pe.outage() && ctx.Err() == nil:
		return g.failed(pe)
	case proxyFailed && !pe.upstream():
		// The proxy's answer about this receiver alone (its rules refused it, or it waited on it
		// past our time): this exchange's failure. The proxy is there, but whether it works for
		// others this does not say.
		return err
	case err != nil && !proxyFailed:
		// The receiver failed, or the exchange did before it reached the proxy: nothing learned
		// of the proxy (a probe's pause is over, so the next exchange probes).
		return err
	case ctx.Err() != nil:
		return err // the caller gave up
	}
	// The exchange went through a tunnel, or the proxy answered that it could not reach the
	// receiver: the proxy works.
	if g.down {
		g.down, g.pause = false, 0
		g.metrics.proxyUp(true)
		g.log.Info("egress proxy answers again; held deliveries go on", "proxy", g.name)
	}
	return err
}

// abandon gives back the probe of an exchange that was not made: the next one probes.
func (g *proxyGate) abandon(probe bool) {
	if g == nil || !probe {
		return
	}
	g.mu.Lock()
	g.probing = false
	g.mu.Unlock()
}

// failed records a failure of the proxy itself and returns the hold of the exchange that met it.
// Guarded by g.mu.
func (g *proxyGate) failed(pe *ProxyError) error {
	now := g.now()
	g.metrics.proxyFailed()
	if !g.down {
		g.down, g.pause = true, proxyPauseMin
		g.metrics.proxyUp(false)
		g.log.Error("egress proxy failed; deliveries are held, not failed, until it answers", "proxy", g.name, "err", pe.Error())
	} else {
		g.pause = min(2*g.pause, proxyPauseMax)
	}
	g.until = now.Add(g.pause)
	return g.held(now, pe)
}

// held is the hold of an exchange while the proxy is down: its appointment is after the next
// probe, spread over one pause so that the held exchanges do not come back together. Guarded by
// g.mu.
func (g *proxyGate) held(now time.Time, cause error) *HeldError {
	g.metrics.held(HeldByProxy, 0)
	retryIn := max(g.until.Sub(now), 0) + rand.N(g.pause+1)
	return &HeldError{Reason: HeldByProxy, Host: "the egress proxy", RetryIn: max(retryIn, time.Millisecond), Cause: cause}
}

// ProxyHold returns the hold of an exchange that failed with err, when err is a failure of the
// egress proxy itself (a token request's, say, made outside the Client's turns), and records it;
// nil otherwise.
func (c *Client) ProxyHold(ctx context.Context, err error) *HeldError {
	if c == nil || c.gate == nil || err == nil {
		return nil
	}
	var held *HeldError
	if errors.As(c.gate.observe(ctx, false, err), &held) {
		return held
	}
	return nil
}
