// Package sources holds the spec's event sources, the parts of webhookd that emit events into the
// delivery engine: variant A's campaigns, variant B's websites (their lifecycle and scheduled
// publication), fan intake (leads, pre-saves) and analytics counters with their thresholds; and the
// catalog of what they emit: each event type's description, and its data shape written once, as the
// struct its emitter fills (eventdata.go; the API's fan intake decodes into Lead and Presave), from
// which the table that validates intake (ValidateEventData) and builds the catalog's examples is
// read.
//
// Service holds the sources' use cases, which the API calls with the caller's account: campaigns,
// websites with their scheduled publication (schedule.go), and fans' intake. It publishes through a
// Publisher and starts publication timers through Timers, both handed in from above (webhooks and
// dispatch reach this package through activities, so it cannot import them).
//
// A source changes its rows and emits its events in one model.ChangeSet (model.Change, or
// dispatch.Publisher.Change to start the deliveries after the commit), the engine's one publish
// path. sources imports model; model never imports sources. Which event types a webhook of each
// variant may subscribe to is the engine's (model.VariantSpec.EventTypes: routing needs it); this
// package describes exactly those types, and a test holds the two to each other. The tables stay in
// model's migrations: one schema.
package sources
