package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"time"

	"go.temporal.io/sdk/client"
)

// suiteResult is every figure of the suite; a scenario that did not run is nil.
type suiteResult struct {
	tiers   *tiersResult
	open    *openLoopResult
	fanOut  *fanOutResult
	burst   *burstResult
	missing int // deliveries the open-loop and fan-out scenarios were still waiting for
}

// suite is issue 10's benchmark: the tiers, openloop, fanout and burst scenarios in that order
// against the same stack, then one markdown table with every figure, written to table. When a
// scenario fails, the table has what ran before it and suite returns the error; missing deliveries
// do not stop it, but make it return an incompleteError at the end.
func suite(ctx context.Context, cfg config, cert tls.Certificate, temporalOpts client.Options, table io.Writer) (suiteResult, error) {
	var r suiteResult
	err := runSuite(ctx, cfg, cert, temporalOpts, &r)
	if werr := writeSuiteTable(table, cfg, r); werr != nil && err == nil {
		err = werr
	}
	if err == nil && r.missing > 0 {
		err = &incompleteError{missing: r.missing, waited: cfg.timeout}
	}
	return r, err
}

func runSuite(ctx context.Context, cfg config, cert tls.Certificate, temporalOpts client.Options, r *suiteResult) error {
	fmt.Println("== suite 1/4: tiers")
	tcfg := cfg
	tcfg.events = orDefault(cfg.events, defaultEvents)
	t, err := measureTiers(ctx, tcfg, cert, temporalOpts)
	if err != nil {
		return fmt.Errorf("tiers: %w", err)
	}
	r.tiers = &t

	fmt.Println("\n== suite 2/4: openloop")
	o, err := measureOpenLoop(ctx, cfg, cert)
	if err != nil {
		return fmt.Errorf("openloop: %w", err)
	}
	r.open = &o
	r.missing += o.s.missing

	fmt.Println("\n== suite 3/4: fanout")
	f, err := measureFanOut(ctx, cfg, cert, 0)
	if err != nil {
		return fmt.Errorf("fanout: %w", err)
	}
	r.fanOut = &f
	r.missing += f.missing

	fmt.Println("\n== suite 4/4: burst")
	b, err := measureBurst(ctx, cfg, cert)
	if err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	r.burst = &b
	return nil
}

// writeSuiteTable writes the suite's figures as one markdown table, preceded by a blank line so
// that it is the output's last paragraph.
func writeSuiteTable(w io.Writer, cfg config, r suiteResult) error {
	rows := [][3]string{}
	add := func(scenario, figure, value string) { rows = append(rows, [3]string{scenario, figure, value}) }
	if t := r.tiers; t != nil {
		for _, tier := range t.all() {
			add("tiers", tier.name, fmt.Sprintf("%.0f deliveries/s (%d in %s)", tier.rate(), tier.n, tier.elapsed.Round(time.Millisecond)))
		}
		add("tiers", "(c)/(b)", fmt.Sprintf("%.2f", t.ratio()))
	}
	if o := r.open; o != nil {
		add("openloop", "rate", fmt.Sprintf("%g events/s for %s, %d accepted", o.rate, o.duration, o.s.events))
		add("openloop", "event-to-receipt p50 / p99 / max", fmt.Sprintf("%s / %s / %s", o.s.p50, o.s.p99, o.s.max))
	}
	if f := r.fanOut; f != nil {
		add("fanout", "webhooks", fmt.Sprintf("%d", f.hooks))
		add("fanout", "time to 202", fmt.Sprintf("%.3f s", f.accepted.Seconds()))
		add("fanout", "time to last receipt", f.last.String())
		add("fanout", "starts by request / sweeper", f.starts.String())
	}
	if b := r.burst; b != nil {
		add("burst", "events", fmt.Sprintf("%d (%d publishers)", b.events, cfg.concurrency))
		add("burst", "intake", fmt.Sprintf("%.0f events/s", b.intake()))
		add("burst", "time to last delivery", fmt.Sprintf("%.3f s", b.t.total.Seconds()))
		add("burst", "deliveries/s", fmt.Sprintf("%.0f", b.deliveries()))
		add("burst", "starts by request / sweeper", b.starts.String())
	}
	out := "\n| scenario | figure | value |\n|---|---|---|\n"
	for _, row := range rows {
		out += fmt.Sprintf("| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	if len(rows) == 0 {
		out += "| (none) | no scenario completed | |\n"
	}
	_, err := io.WriteString(w, out)
	return err
}
