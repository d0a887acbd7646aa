package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// rateTolerance is how far the rate a receiver sees may stray from a webhook's rateLimit: issue
// 27 asks for the set rate within 5%, from the first delivery to the last.
const rateTolerance = 0.05

// ratelimit is issue 27's measurement of a webhook's own rate limit with a backlog. For each rate
// of cfg.rates, one after another so that they do not compete, it registers a fresh variant A
// webhook of account C (-key) at /rate/<rate> on a receiver that answers at once, PATCHes it to
// {"rateLimit": rate}, publishes cfg.events events at once (concurrently) and waits for their
// deliveries, up to cfg.timeout after the publishes returned. Then it deletes the webhook, before
// the next rate publishes: an event matches every webhook of the account, and one rate's
// leftovers must not compete with the next. It prints one row per rate: the span from the first
// arrival to the last and the rate the receiver saw over it, against the rate set.
func ratelimit(ctx context.Context, cfg config, cert tls.Certificate) error {
	recv := newArrivals()
	addr, stop, err := serveTLS(cfg.listen, cert, recv)
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	defer stop()
	c := newAPIClient(cfg.api, cfg.key, cfg.events)

	var rows []rateRow
	missing := 0
	for _, r := range cfg.rates {
		row, err := measureRate(ctx, cfg, c, recv, "https://"+addr, r)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		missing += row.events - row.pace.arrived
	}

	fmt.Printf("\nreceiver-side rate with a backlog: per rate, a fresh webhook and %d events published at once, the rates one after another (rate = (arrived - 1) / first to last; first arrival: from the first publish):\n", cfg.events)
	if err := printRateRows(os.Stdout, rows); err != nil {
		return err
	}
	if missing > 0 {
		return &incompleteError{missing: missing, waited: cfg.timeout}
	}
	return nil
}

// rateRow is one rate's measurement.
type rateRow struct {
	set        int           // the webhook's rateLimit, per second
	events     int           // events published
	accepted   time.Duration // from the first publish to the last 202
	firstAfter time.Duration // from the first publish to the first arrival
	pace       pace
}

// measureRate measures one rate on a webhook of its own, deleted when it returns.
func measureRate(ctx context.Context, cfg config, c *apiClient, recv *arrivals, base string, perSecond int) (rateRow, error) {
	url := fmt.Sprintf("%s/rate/%d", base, perSecond)
	hook, err := c.createWebhook(ctx, url)
	if err != nil {
		return rateRow{}, fmt.Errorf("account C (-key): %w", err)
	}
	defer deleteWebhooks(ctx, c, []int64{hook})
	if err := c.setRateLimit(ctx, hook, perSecond); err != nil {
		return rateRow{}, err
	}
	fmt.Printf("\nrateLimit %d/s: webhook %d at %s; %d events published at once\n", perSecond, hook, url, cfg.events)

	l, took := publishAtOnce(ctx, c, cfg.events)
	fmt.Printf("  %s, accepted in %.3f s\n", l, took.Seconds())
	if err := l.err(); err != nil {
		return rateRow{}, err
	}
	if n := l.deliveries(); n != cfg.events {
		return rateRow{}, fmt.Errorf("the %d events matched %d webhooks in all, want one each: account C (-key) must have no campaign.created webhook but the scenario's", cfg.events, n)
	}
	pubs := l.accepted()
	waitForReceipts(ctx, pubs, hook, recv, time.Now().Add(cfg.timeout), cfg.progress, func(n int) {
		fmt.Printf("  %d of %d arrived\n", n, len(pubs))
	})
	if err := ctx.Err(); err != nil {
		return rateRow{}, err
	}

	var times []time.Time
	for _, p := range pubs {
		if at, ok := recv.arrived(messageID(p.eventID, hook)); ok {
			times = append(times, at)
		}
	}
	row := rateRow{set: perSecond, events: len(pubs), accepted: took, pace: paceOf(times)}
	if len(times) > 0 {
		first := slices.MinFunc(pubs, func(a, b publication) int { return a.start.Compare(b.start) })
		row.firstAfter = slices.MinFunc(times, time.Time.Compare).Sub(first.start)
	}
	fmt.Printf("  %d of %d arrived; gaps between arrivals (ms): %s\n", row.pace.arrived, row.events, row.pace.gapList())
	return row, nil
}

// printRateRows prints the rows as a table.
func printRateRows(w io.Writer, rows []rateRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rateLimit/s\tevents\taccepted in\tfirst arrival\tfirst to last\treceiver rate/s\tof the set rate\twithin 5%\tlargest gap\tarrived")
	for _, r := range rows {
		rate, ok := r.pace.rate()
		rateCell, ratioCell, within := "n/a", "n/a", "n/a"
		if ok {
			ratio := rate / float64(r.set)
			rateCell, ratioCell = strconv.FormatFloat(rate, 'f', 3, 64), fmt.Sprintf("%.3f", ratio)
			within = "no"
			if withinTolerance(ratio) {
				within = "yes"
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%.3f s\t%.3f s\t%.3f s\t%s\t%s\t%s\t%.3f s\t%d of %d\n", r.set, r.events,
			r.accepted.Seconds(), r.firstAfter.Seconds(), r.pace.span.Seconds(), rateCell, ratioCell, within,
			r.pace.maxGap().Seconds(), r.pace.arrived, r.events)
	}
	return tw.Flush()
}

// withinTolerance reports whether a ratio of the seen rate to the set one is within rateTolerance
// of 1. The small epsilon keeps a ratio of exactly 0.95 or 1.05 inside despite float rounding.
func withinTolerance(ratio float64) bool {
	return math.Abs(ratio-1) <= rateTolerance+1e-9
}

// pace is how a receiver saw deliveries arrive: how many, the span from the first to the last, and
// the gaps between consecutive arrivals, in order.
type pace struct {
	arrived int
	span    time.Duration
	gaps    []time.Duration
}

// paceOf reads the pace from arrival times, in any order.
func paceOf(times []time.Time) pace {
	sorted := slices.SortedFunc(slices.Values(times), time.Time.Compare)
	p := pace{arrived: len(sorted)}
	for i := 1; i < len(sorted); i++ {
		p.gaps = append(p.gaps, sorted[i].Sub(sorted[i-1]))
	}
	if len(sorted) > 1 {
		p.span = sorted[len(sorted)-1].Sub(sorted[0])
	}
	return p
}

// rate is the receiver-side rate per second, (arrived - 1) / span: the deliveries after the first
// over the time they took. It is not defined (false) for fewer than two arrivals or a zero span.
func (p pace) rate() (float64, bool) {
	if p.arrived < 2 || p.span <= 0 {
		return 0, false
	}
	return float64(p.arrived-1) / p.span.Seconds(), true
}

// maxGap is the largest gap between consecutive arrivals, 0 for fewer than two.
func (p pace) maxGap() time.Duration {
	if len(p.gaps) == 0 {
		return 0
	}
	return slices.Max(p.gaps)
}

// gapList is the gaps in milliseconds, in order: "1000 1001 999 2000", or "-".
func (p pace) gapList() string {
	if len(p.gaps) == 0 {
		return "-"
	}
	parts := make([]string, len(p.gaps))
	for i, g := range p.gaps {
		parts[i] = strconv.FormatInt(g.Round(time.Millisecond).Milliseconds(), 10)
	}
	return strings.Join(parts, " ")
}

// parseRates parses -rates: rateLimit values, per second, separated by commas, each one the API
// accepts (1..10000).
func parseRates(s string) ([]int, error) {
	var rates []int
	for f := range strings.SplitSeq(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r < 1 || r > 10000 {
			return nil, fmt.Errorf("-rates %q: want rateLimit values 1..10000 separated by commas, as 1,2,5,50", s)
		}
		rates = append(rates, r)
	}
	return rates, nil
}
