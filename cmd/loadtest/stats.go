package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// obs is one event-to-receipt time. For an event that had not arrived when the wait ended it is
// the time waited so far: the true figure is at least that.
type obs struct {
	d          time.Duration
	lowerBound bool
}

func (o obs) String() string {
	s := fmt.Sprintf("%.3f s", o.d.Seconds())
	if o.lowerBound {
		return "≥ " + s
	}
	return s
}

// summary is the distribution of one phase's event-to-receipt times.
type summary struct {
	events, missing int
	p50, p99, max   obs
}

func summarize(o []obs) summary {
	s := summary{events: len(o)}
	if len(o) == 0 {
		return s
	}
	sorted := slices.Clone(o)
	// On a tie the exact figure sorts first: then a percentile is exact when no lower bound ranks
	// at or below it.
	slices.SortFunc(sorted, func(a, b obs) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		switch {
		case a.lowerBound == b.lowerBound:
			return 0
		case a.lowerBound:
			return 1
		}
		return -1
	})
	for _, x := range sorted {
		if x.lowerBound {
			s.missing++
		}
	}
	s.p50, s.p99, s.max = quantile(sorted, 0.50), quantile(sorted, 0.99), quantile(sorted, 1)
	return s
}

// quantile is the nearest-rank q-quantile of sorted. A lower bound at or below that rank makes the
// result a lower bound: the missing event's true time may rank above it. A lower bound above the
// rank does not, since its true time is larger still.
func quantile(sorted []obs, q float64) obs {
	rank := max(1, int(math.Ceil(q*float64(len(sorted)))))
	out := sorted[rank-1]
	for _, x := range sorted[:rank] {
		out.lowerBound = out.lowerBound || x.lowerBound
	}
	return out
}

// ratio formats a/b: a lower bound when a is one, an upper bound when b is one.
func ratio(a, b obs) string {
	if b.d <= 0 || (a.lowerBound && b.lowerBound) {
		return "n/a"
	}
	s := fmt.Sprintf("%.1fx", float64(a.d)/float64(b.d))
	switch {
	case a.lowerBound:
		return "≥ " + s
	case b.lowerBound:
		return "≤ " + s
	}
	return s
}
