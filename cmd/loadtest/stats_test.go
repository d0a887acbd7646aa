package main

import (
	"testing"
	"time"
)

func TestSummarizeMarksOnlyPercentilesAMissingEventCouldMove(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	exact := func(n int) obs { return obs{d: ms(n)} }
	bound := func(n int) obs { return obs{d: ms(n), lowerBound: true} }
	hundred := func(last obs) []obs {
		o := make([]obs, 0, 100)
		for i := 1; i < 100; i++ {
			o = append(o, exact(i))
		}
		return append(o, last)
	}
	tests := []struct {
		name          string
		in            []obs
		p50, p99, max string
		missing       int
	}{
		{"all arrived", hundred(exact(100)), "0.050 s", "0.099 s", "0.100 s", 0},
		{"one missing at the top", hundred(bound(500)), "0.050 s", "0.099 s", "≥ 0.500 s", 1},
		// The missing event waited only 10 ms: its true time may rank anywhere above that.
		{"one missing early", hundred(bound(10)), "≥ 0.049 s", "≥ 0.098 s", "≥ 0.099 s", 1},
		{"tie with an exact figure", []obs{exact(1), exact(2), bound(2)}, "0.002 s", "≥ 0.002 s", "≥ 0.002 s", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summarize(tt.in)
			if s.p50.String() != tt.p50 || s.p99.String() != tt.p99 || s.max.String() != tt.max || s.missing != tt.missing {
				t.Errorf("p50 %s p99 %s max %s missing %d; want %s %s %s %d",
					s.p50, s.p99, s.max, s.missing, tt.p50, tt.p99, tt.max, tt.missing)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b obs
		want string
	}{
		{obs{d: 3 * time.Second}, obs{d: time.Second}, "3.0x"},
		{obs{d: 3 * time.Second, lowerBound: true}, obs{d: time.Second}, "≥ 3.0x"},
		{obs{d: 3 * time.Second}, obs{d: time.Second, lowerBound: true}, "≤ 3.0x"},
		{obs{d: time.Second}, obs{}, "n/a"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%s, %s) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
	}
}
