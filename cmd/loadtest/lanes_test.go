package main

import (
	"net/http"
	"testing"
	"time"
)

// TestCheckLaneOrder: the lanes scenario's reading of a receiver's log finds each kind of order
// violation, and none in a log that keeps the order (a retry of event 0 after a 503 included).
func TestCheckLaneOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	req := func(idx int, seq int64, from, to, status int) laneRequest {
		return laneRequest{key: 1, idx: idx, event: int64(100 + idx), seq: seq, at: at(from), answer: at(to), status: status}
	}
	ordered := []laneRequest{
		req(0, 1, 0, 5, http.StatusServiceUnavailable), req(0, 1, 100, 105, http.StatusOK),
		req(1, 2, 110, 115, http.StatusOK), req(2, 3, 120, 125, http.StatusOK),
	}
	if r := checkLaneOrder(ordered); len(r.violations) != 0 || r.requests != 4 || r.failed != 1 {
		t.Fatalf("an ordered log: %+v", r)
	}
	for name, log := range map[string][]laneRequest{
		"event 1 before event 0's 2xx":      {req(0, 1, 0, 5, http.StatusServiceUnavailable), req(1, 2, 10, 15, http.StatusOK), req(0, 1, 100, 105, http.StatusOK)},
		"event 1 while event 0 is answered": {req(0, 1, 0, 50, http.StatusOK), req(1, 2, 10, 60, http.StatusOK)},
		"a sequence that does not grow":     {req(0, 2, 0, 5, http.StatusOK), req(1, 2, 10, 15, http.StatusOK)},
		"two sequences for one event":       {req(0, 1, 0, 5, http.StatusServiceUnavailable), req(0, 3, 10, 15, http.StatusOK)},
	} {
		if r := checkLaneOrder(log); len(r.violations) == 0 {
			t.Errorf("%s: no violation found", name)
		}
	}
	resent := append(ordered, laneRequest{key: 1, idx: 0, event: 100, seq: 1, resend: true, at: at(200), answer: at(205), status: http.StatusOK})
	if r := checkLaneOrder(resent); len(r.violations) != 0 || r.duplicates != 1 {
		t.Fatalf("a resend of event 0 after event 2: %+v, want no violation and one duplicate", r)
	}
}
