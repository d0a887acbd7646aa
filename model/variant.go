package model

import (
	"slices"

	"github.com/webhookd/webhookd/wire"
)

// Variant is one of the two API surfaces that share the delivery engine.
type Variant string

const (
	// VariantA is the campaigns API (x-api-key, {success, data} envelope).
	VariantA Variant = "A"
	// VariantB is the websites and fans API (Bearer, {data, message, isError} envelope, signed bodies).
	VariantB Variant = "B"
)

// Variants lists every variant, in a fixed order.
var Variants = []Variant{VariantA, VariantB}

// VariantSpec is what differs between the variants below the HTTP layer: every layer (model's
// queries, the activities, the API) reads the difference here instead of comparing variants.
// api/variant.go adds only what HTTP needs on top (envelopes, the JSON shape of a webhook).
type VariantSpec struct {
	// EventTypes are the event types a webhook may subscribe to.
	EventTypes []string
	// Statuses are a webhook's statuses; InitialStatus is a new webhook's, and one's whose URL
	// changed.
	Statuses      []string
	InitialStatus string
	// FailingStatus is where an exhausted delivery moves its webhook.
	FailingStatus string
	// FailedAttemptStatus, when set, is where every failed attempt moves the webhook at once (A);
	// otherwise only an exhausted delivery moves it (B).
	FailedAttemptStatus string
	// HealedStatus is where a successful attempt moves a webhook whose status is one of HealsFrom.
	HealsFrom    []string
	HealedStatus string
	// DisabledStatus and EnabledStatus, when set, are the statuses that disabling and enabling a
	// webhook set (B). Without them the status stays and the webhook shows a disabled flag (A).
	DisabledStatus, EnabledStatus string
	// LastStatus: every attempt records its time and outcome in last_triggered_at and last_status
	// (B's lastTriggered and lastStatus).
	LastStatus bool
	// TypeField is the JSON name of an event's type, in its delivery body and in the API.
	TypeField string
	// Body is the layout of the delivery body (A: BodyA; B: BodyB, signed).
	Body wire.Layout
	// TestEvent: an EventTest event follows a webhook's registration and a manual retry of it, and
	// is not an event type to subscribe to.
	TestEvent bool
	// APIPrefix is where the variant's API lives; a client presents its API key in AuthHeader,
	// after AuthScheme and a space when AuthScheme is set.
	APIPrefix  string
	AuthHeader string
	AuthScheme string
}

var variantSpecs = map[Variant]*VariantSpec{
	VariantA: {
		EventTypes:          []string{"campaign.created", "campaign.updated", "campaign.processing", "campaign.completed", "campaign.failed"},
		Statuses:            []string{StatusPending, StatusProcessing, StatusFailed, StatusFinished},
		InitialStatus:       StatusPending,
		FailingStatus:       StatusFailed,
		FailedAttemptStatus: StatusFailed,
		// finished is terminal and left alone.
		HealsFrom:    []string{StatusPending, StatusFailed},
		HealedStatus: StatusProcessing,
		TypeField:    "eventType",
		Body:         wire.LayoutA,
		APIPrefix:    "/api/svc/v2",
		AuthHeader:   "x-api-key",
	},
	VariantB: {
		EventTypes:    []string{"website.published", "website.archived", "lead.captured", "presave.completed", "analytics.threshold"},
		Statuses:      []string{StatusActive, StatusFailing, StatusDisabled},
		InitialStatus: StatusActive,
		FailingStatus: StatusFailing,
		// disabled stays disabled until the webhook is enabled.
		HealsFrom:      []string{StatusFailing},
		HealedStatus:   StatusActive,
		DisabledStatus: StatusDisabled,
		EnabledStatus:  StatusActive,
		LastStatus:     true,
		TypeField:      "event",
		Body:           wire.LayoutB,
		TestEvent:      true,
		APIPrefix:      "/v2/svc/v2",
		AuthHeader:     "Authorization",
		AuthScheme:     "Bearer",
	},
}

// Spec returns what is particular to variant v. Only A and B are stored or routed; anything else
// gets B's, as most checks did before the table (they read "v == VariantA").
func (v Variant) Spec() *VariantSpec {
	if s, ok := variantSpecs[v]; ok {
		return s
	}
	return variantSpecs[VariantB]
}

// Valid reports whether v is a variant.
func (v Variant) Valid() bool {
	_, ok := variantSpecs[v]
	return ok
}

// EventTypes returns the event types a webhook of variant v may subscribe to.
func (v Variant) EventTypes() []string { return slices.Clone(v.Spec().EventTypes) }

// Registrable reports whether eventType may be subscribed to in variant v.
func (v Variant) Registrable(eventType string) bool {
	return slices.Contains(v.Spec().EventTypes, eventType)
}

// Statuses returns the webhook statuses of variant v.
func (v Variant) Statuses() []string { return slices.Clone(v.Spec().Statuses) }

// InitialStatus is the status a webhook gets on create and on a URL update.
func (v Variant) InitialStatus() string { return v.Spec().InitialStatus }
