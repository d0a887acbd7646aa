package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/wire"
)

// TestConsumedIDs: the destinations scenario's tally of what a broker's consumer took for webhook
// 7: it is done at the expected count of distinct webhook-ids, counts a copy as a copy (not a new
// event, and not a failure), leaves another webhook's messages aside (webhook 17's ids end with
// "7" too), finds an event whose webhook-id never came, and times the tier by the last event's
// first message, not by a later copy.
func TestConsumedIDs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	c := newConsumedIDs(7, 3)
	c.takeAt(wire.MessageID(1, 7), at(10))
	c.takeAt(wire.MessageID(1, 17), at(11))
	c.takeAt("", at(12)) // a message without webhook-id
	c.takeAt(wire.MessageID(2, 7), at(20))
	c.takeAt(wire.MessageID(1, 7), at(25)) // a copy
	select {
	case <-c.done:
		t.Fatal("done after two of three events")
	default:
	}
	c.takeAt(wire.MessageID(3, 7), at(30))
	c.takeAt(wire.MessageID(3, 7), at(40)) // a copy after the last event came
	select {
	case <-c.done:
	default:
		t.Fatal("not done once the three events came")
	}
	if got := c.distinct(); got != 3 {
		t.Fatalf("distinct %d, want 3", got)
	}
	tally := c.tally([]int64{1, 2, 3})
	if len(tally.missing) != 0 || !tally.last.Equal(at(30)) || tally.copies != 2 || tally.others != 2 {
		t.Fatalf("tally %+v, want nothing missing, the last at 30 ms, 2 copies, 2 others", tally)
	}
	if tally := c.tally([]int64{1, 2, 3, 4}); !slices.Equal(tally.missing, []int64{4}) {
		t.Fatalf("event 4 was never consumed, yet missing is %v", tally.missing)
	}
}

// TestTurnOrder: each kind goes first in one round of every n, and each round runs every kind once.
func TestTurnOrder(t *testing.T) {
	firsts := map[int]bool{}
	for r := range 3 {
		order := turnOrder(3, r)
		sorted := slices.Sorted(slices.Values(order))
		if !slices.Equal(sorted, []int{0, 1, 2}) {
			t.Fatalf("round %d runs %v, want each of the 3 kinds once", r, order)
		}
		firsts[order[0]] = true
	}
	if len(firsts) != 3 {
		t.Fatalf("over 3 rounds the first kinds were %v, want each kind once", firsts)
	}
	if got := turnOrder(3, 4); !slices.Equal(got, []int{1, 2, 0}) {
		t.Fatalf("round 5 of 3 kinds: %v, want [1 2 0]", got)
	}
}

// TestMeanAttempt: the mean attempt of a tier is read from webhookd's attempt histogram, summed
// over its labels, between two scrapes, the first of which may come before any attempt (no
// sample yet); a failed scrape or no attempt gives none.
func TestMeanAttempt(t *testing.T) {
	scrape := func(a, b string) attemptTime {
		return parseAttemptTime(strings.NewReader(`# TYPE webhookd_delivery_attempt_duration_seconds histogram
webhookd_delivery_attempt_duration_seconds_bucket{variant="A",outcome="delivered",le="+Inf"} ` + a + `
webhookd_delivery_attempt_duration_seconds_sum{variant="A",outcome="delivered"} ` + b + `
webhookd_delivery_attempt_duration_seconds_count{variant="A",outcome="delivered"} ` + a + `
webhookd_delivery_attempt_duration_seconds_bucket{variant="A",outcome="refused",le="+Inf"} 2
webhookd_delivery_attempt_duration_seconds_sum{variant="A",outcome="refused"} 0.5
webhookd_delivery_attempt_duration_seconds_count{variant="A",outcome="refused"} 2
`))
	}
	before, after := scrape("10", "1.0"), scrape("110", "3.0")
	if !before.ok || before.count != 12 || before.sum != 1.5 {
		t.Fatalf("parsed %+v, want 12 attempts over 1.5 s", before)
	}
	if got := meanAttempt(before, after); got != 20*time.Millisecond {
		t.Fatalf("mean attempt %s, want 20ms (2 s over 100 attempts)", got)
	}
	if got := meanAttempt(attemptTime{}, after); got != 0 {
		t.Fatalf("a failed scrape gives %s, want none", got)
	}
	if got := meanAttempt(after, after); got != 0 {
		t.Fatalf("no attempt gives %s, want none", got)
	}
	// Before webhookd's first attempt the histogram has no sample: none were made.
	none := parseAttemptTime(strings.NewReader("# TYPE other counter\nother 1\n"))
	if !none.ok || none.count != 0 {
		t.Fatalf("a /metrics without the histogram gives %+v, want ok and no attempt", none)
	}
	if got := meanAttempt(none, after); got != 3500*time.Millisecond/112 {
		t.Fatalf("from no attempt to 112 attempts over 3.5 s: %s, want %s", got, 3500*time.Millisecond/112)
	}
	if got := parseAttemptTime(strings.NewReader("not metrics {")); got.ok {
		t.Fatalf("a scrape that does not parse gives %+v, want ok false", got)
	}
}
