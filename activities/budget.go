package activities

import "time"

// AttemptBudget is the time of one delivery attempt, all of it derived from the attempt's timeout:
// the workflow's StartToClose for the Deliver activity, how long the activity may wait for its
// turn at a busy receiver, and the worker's stop timeout. They are summed here only, so that a
// change to one part moves the others with it.
type AttemptBudget struct {
	// Timeout bounds the HTTP exchange: the workflow input's AttemptTimeout, or in the worker
	// the egress client's timeout when that is shorter (WEBHOOKD_DELIVERY_TIMEOUT, a ceiling).
	Timeout time.Duration
}

// RecordMargin is what an attempt keeps after its exchange for recording the outcome.
const RecordMargin = 5 * time.Second

// Attempt is how long one attempt may hold its turn at a receiver: its exchange and its record
// (a turn is given back once the outcome is recorded).
func (b AttemptBudget) Attempt() time.Duration { return b.Timeout + RecordMargin }

// StartToClose is the Deliver activity's StartToClose: an attempt may first wait in the worker
// for the attempt ahead of it at a busy receiver to end, then make its own.
func (b AttemptBudget) StartToClose() time.Duration { return 2 * b.Attempt() }

// TurnWait is how long a regular attempt whose activity has left before its deadline may wait for
// its turn: what its own exchange and record leave of that.
func (b AttemptBudget) TurnWait(left time.Duration) time.Duration { return max(0, left-b.Attempt()) }

// StopTimeout is the worker's stop timeout: an attempt in flight at a deploy finishes its exchange
// and records it.
func (b AttemptBudget) StopTimeout() time.Duration { return b.Attempt() }
