package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseVmRSS(t *testing.T) {
	status := "Name:\twebhookd\nVmPeak:\t  812345 kB\nVmRSS:\t  104512 kB\nRssAnon:\t   90000 kB\n"
	got, err := parseVmRSS(strings.NewReader(status))
	if err != nil || got != 104512*1024 {
		t.Fatalf("parseVmRSS = %d, %v; want %d", got, err, 104512*1024)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseVmRSS(strings.NewReader(bad)); err == nil {
			t.Errorf("parseVmRSS(%q): no error", bad)
		}
	}
}

func TestCheckpointsAndFirstAt(t *testing.T) {
	if got := checkpoints(100000); !slices.Equal(got, []int{0, 25000, 50000, 75000, 100000}) {
		t.Fatalf("checkpoints(100000) = %v", got)
	}
	samples := []rssSample{{pending: 0, rss: 1}, {pending: 30000, rss: 2}, {pending: 60000, rss: 3}}
	if s, ok := firstAt(samples, 25000); !ok || s.rss != 2 {
		t.Errorf("firstAt(25000) = %v, %v; want the sample at 30000", s, ok)
	}
	if _, ok := firstAt(samples, 75000); ok {
		t.Error("firstAt(75000) found a sample; none reached it")
	}
}
