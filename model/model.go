// Package model holds the delivery engine's persistent domain: accounts and their API keys,
// webhooks, events, deliveries and delivery attempts, portal sessions, the SQL migrations of the
// whole schema, and the rules that belong to that data (variants and the event types a webhook may
// subscribe to, statuses, secrets, the input rules every value a client sends must meet). What
// emits events (websites, campaigns, fans, analytics) and what each event's data looks like is
// package sources, which emits through ChangeSet.Emit. Query functions take bun.IDB so callers can
// compose them in one transaction.
package model

import (
	"errors"
	"time"
)

// ErrNotFound is returned when a row does not exist or belongs to another account: callers must not be
// able to tell the two apart.
var ErrNotFound = errors.New("not found")

// ErrLimitReached is returned when an account already holds the configured number of webhooks.
var ErrLimitReached = errors.New("limit reached")

// Webhook statuses of variant A.
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusFailed     = "failed"
	StatusFinished   = "finished"
)

// Webhook statuses of variant B.
const (
	StatusActive   = "active"
	StatusFailing  = "failing"
	StatusDisabled = "disabled"
)

// Delivery outcomes kept in a variant B webhook's lastStatus.
const (
	LastStatusSuccess = "success"
	LastStatusFailed  = "failed"
)

// EventTest is the variant B event sent after registration. It is not registrable.
const EventTest = "webhook.test"

// Now is the service's notion of the current time: UTC, truncated to the microsecond precision that
// PostgreSQL stores, so a value reads back from either database exactly as it was written.
func Now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}

// Clock is where a use case reads the time that decides something: the stamps of the rows it
// writes, the "now" of a window. The zero Clock is Now. main never sets one; a test passes its own,
// carried in the use cases' Config, to set or advance time instead of sleeping. There is no
// process-wide clock to swap.
type Clock func() time.Time

// Now is c's current time, normalized as Now's is.
func (c Clock) Now() time.Time {
	if c == nil {
		return Now()
	}
	return c().UTC().Truncate(time.Microsecond)
}
