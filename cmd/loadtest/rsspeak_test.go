package main

import (
	"os"
	"testing"
)

// TestWatchRSS: the sampler reads this process's resident memory, and no pid reads nothing.
func TestWatchRSS(t *testing.T) {
	if got := watchRSS(os.Getpid()).Stop(); got <= 0 {
		t.Errorf("peak RSS of this process = %d, want > 0", got)
	}
	if got := watchRSS(0).Stop(); got != 0 {
		t.Errorf("peak RSS without a pid = %d, want 0", got)
	}
	if got := rssPair(0, 0); got != "-" {
		t.Errorf("rssPair(0, 0) = %q, want -", got)
	}
	if got := rssPair(80e6, 95e6); got != "80 MB / 95 MB" {
		t.Errorf("rssPair = %q", got)
	}
}
