package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPaceOf: the receiver-side rate is the arrivals after the first over the span from the first
// to the last, whatever order the times come in.
func TestPaceOf(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	spaced := func(gaps ...time.Duration) []time.Time {
		times := []time.Time{t0}
		for _, g := range gaps {
			times = append(times, times[len(times)-1].Add(g))
		}
		return times
	}
	repeat := func(n int, g time.Duration) []time.Duration { return slices.Repeat([]time.Duration{g}, n) }
	tests := []struct {
		name    string
		times   []time.Time
		arrived int
		span    time.Duration
		rate    float64 // NaN: not defined
		maxGap  time.Duration
	}{
		{"40 at rateLimit 1, on time", spaced(repeat(39, time.Second)...), 40, 39 * time.Second, 1, time.Second},
		// The old build: the first 14 a second apart, then every 2 s.
		{"40, half speed after 14", spaced(append(repeat(13, time.Second), repeat(26, 2*time.Second)...)...),
			40, 65 * time.Second, 0.6, 2 * time.Second},
		{"40 at rateLimit 50, on time", spaced(repeat(39, 20*time.Millisecond)...), 40, 780 * time.Millisecond, 50, 20 * time.Millisecond},
		{"one slow gap", spaced(time.Second, 3*time.Second, time.Second), 4, 5 * time.Second, 0.6, 3 * time.Second},
		{"out of order", []time.Time{t0.Add(2 * time.Second), t0, t0.Add(time.Second)}, 3, 2 * time.Second, 1, time.Second},
		{"one arrival", []time.Time{t0}, 1, 0, math.NaN(), 0},
		{"none", nil, 0, 0, math.NaN(), 0},
		{"all at once", []time.Time{t0, t0, t0}, 3, 0, math.NaN(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := paceOf(tc.times)
			if p.arrived != tc.arrived || p.span != tc.span || p.maxGap() != tc.maxGap {
				t.Errorf("arrived %d, span %s, largest gap %s; want %d, %s, %s", p.arrived, p.span, p.maxGap(), tc.arrived, tc.span, tc.maxGap)
			}
			rate, ok := p.rate()
			switch {
			case math.IsNaN(tc.rate) && ok:
				t.Errorf("rate %g, want none", rate)
			case !math.IsNaN(tc.rate) && (!ok || math.Abs(rate-tc.rate) > 1e-9):
				t.Errorf("rate %g (defined: %v), want %g", rate, ok, tc.rate)
			}
			if len(p.gaps) != max(0, tc.arrived-1) {
				t.Errorf("%d gaps for %d arrivals", len(p.gaps), tc.arrived)
			}
		})
	}
}

func TestPaceGapList(t *testing.T) {
	p := paceOf([]time.Time{time.Unix(0, 0), time.Unix(1, 600_000), time.Unix(3, 0)}) // gaps of 1000.6 and 1999.4 ms
	if got, want := p.gapList(), "1001 1999"; got != want {
		t.Errorf("gapList = %q, want %q", got, want)
	}
	if got := paceOf(nil).gapList(); got != "-" {
		t.Errorf("no arrivals: gapList = %q, want -", got)
	}
}

func TestWithinTolerance(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		want  bool
	}{{1, true}, {0.95, true}, {1.05, true}, {39.0 / 40, true}, {0.949, false}, {1.051, false}, {0.6, false}} {
		if got := withinTolerance(tc.ratio); got != tc.want {
			t.Errorf("withinTolerance(%g) = %v, want %v", tc.ratio, got, tc.want)
		}
	}
}

func TestParseRates(t *testing.T) {
	got, err := parseRates("1, 2,5,50")
	if err != nil || !slices.Equal(got, []int{1, 2, 5, 50}) {
		t.Fatalf("parseRates = %v, %v; want [1 2 5 50]", got, err)
	}
	for _, bad := range []string{"", "1,,2", "0", "10001", "1,x", "-1"} {
		if _, err := parseRates(bad); err == nil || !strings.Contains(err.Error(), "-rates") {
			t.Errorf("parseRates(%q): err %v, want a refusal naming -rates", bad, err)
		}
	}
}

// TestPrintRateRows: the table names the rate the receiver saw and its ratio to the set one, and
// says n/a where there is no rate to see.
func TestPrintRateRows(t *testing.T) {
	t0 := time.Unix(0, 0)
	var half []time.Time
	for i := range 40 {
		half = append(half, t0.Add(time.Duration(i)*2*time.Second))
	}
	var b strings.Builder
	err := printRateRows(&b, []rateRow{
		{set: 1, events: 40, accepted: 300 * time.Millisecond, firstAfter: 50 * time.Millisecond, pace: paceOf(half)},
		{set: 5, events: 40, pace: paceOf([]time.Time{t0})},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a header and 2 rows:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{
		{"1", "40", "0.300 s", "0.050 s", "78.000 s", "0.500", "0.500", "no", "2.000 s", "40 of 40"},
		{"5", "40", "n/a", "n/a", "n/a", "1 of 40"},
	} {
		for _, cell := range want {
			if !strings.Contains(lines[i+1], cell) {
				t.Errorf("row %d %q lacks %q", i+1, lines[i+1], cell)
			}
		}
	}
}
