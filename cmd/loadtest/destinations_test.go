package main

import (
	"slices"
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
