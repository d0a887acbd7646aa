// Package model holds webhookd's persistent domain: accounts and their API keys, webhooks, events,
// deliveries and delivery attempts, the SQL migrations that create them, and the rules that belong to
// the data itself (variants, event types, statuses, secrets). Query functions
// take bun.IDB so callers can compose them in one transaction.
package model

import (
	"errors"
	"slices"
	"time"
)

// ErrNotFound is returned when a row does not exist or belongs to another account: callers must not be
// able to tell the two apart.
var ErrNotFound = errors.New("not found")

// ErrLimitReached is returned when an account already holds the configured number of webhooks.
var ErrLimitReached = errors.New("limit reached")

// Variant is one of the two API surfaces that share the delivery engine.
type Variant string

const (
	// VariantA is the campaigns API (x-api-key, {success, data} envelope).
	VariantA Variant = "A"
	// VariantB is the websites and fans API (Bearer, {data, message, isError} envelope, signed bodies).
	VariantB Variant = "B"
)

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

var (
	eventTypesA = []string{"campaign.created", "campaign.updated", "campaign.processing", "campaign.completed", "campaign.failed"}
	eventTypesB = []string{"website.published", "website.archived", "lead.captured", "presave.completed", "analytics.threshold"}
	statusesA   = []string{StatusPending, StatusProcessing, StatusFailed, StatusFinished}
	statusesB   = []string{StatusActive, StatusFailing, StatusDisabled}
)

// EventTypes returns the event types a webhook of variant v may subscribe to.
func (v Variant) EventTypes() []string {
	if v == VariantA {
		return slices.Clone(eventTypesA)
	}
	return slices.Clone(eventTypesB)
}

// Registrable reports whether eventType may be subscribed to in variant v.
func (v Variant) Registrable(eventType string) bool {
	if v == VariantA {
		return slices.Contains(eventTypesA, eventType)
	}
	return slices.Contains(eventTypesB, eventType)
}

// Statuses returns the webhook statuses of variant v.
func (v Variant) Statuses() []string {
	if v == VariantA {
		return slices.Clone(statusesA)
	}
	return slices.Clone(statusesB)
}

// InitialStatus is the status a webhook gets on create and on a URL update.
func (v Variant) InitialStatus() string {
	if v == VariantA {
		return StatusPending
	}
	return StatusActive
}

// Now is the service's notion of the current time: UTC, truncated to the microsecond precision that
// PostgreSQL stores, so a value reads back from either database exactly as it was written.
func Now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}
