package model

import (
	"encoding/json"
	"errors"
	"fmt"
)

// EventVersions is what the engine knows of the versions of event types' data (docs/events.md,
// "Versions"): the newest version of a type, and how data of one version reads in an older one.
// The shapes and their conversions are package sources's, which model cannot import: the process's
// composition root (cmd/webhookd, a test's harness) takes sources's table (sources.Versions) and
// hands it to what publishes and delivers (webhooks.Config, activities.Activities), which pass it
// here. A nil EventVersions knows no versions: every type has one, version 1, and nothing can be
// converted.
type EventVersions interface {
	// Latest is the newest version of eventType's data; 0 for a type it does not know (notices,
	// whose data has one version).
	Latest(eventType string) int
	// Downgrade converts data (canonical JSON) of version from to version to, from > to >= 1,
	// returning canonical JSON.
	Downgrade(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error)
}

// LatestVersion is the newest version of eventType's data in versions: what intake accepts and
// emitters write, and what a new webhook receives unless it pins another. 1 for a type without
// versions, and for every type when versions is nil.
func LatestVersion(versions EventVersions, eventType string) int {
	if versions != nil {
		if n := versions.Latest(eventType); n > 0 {
			return n
		}
	}
	return 1
}

// ErrNoVersion: data asked for in a version newer than the one it is written in (a version is
// never converted up), or below 1.
var ErrNoVersion = errors.New("no such version of the event's data")

// DataAt is data, of eventType and written in version from, as it reads in version to, converted by
// versions. Data is never converted up: a to of 0 or at least from gives data as it is, with no
// decoding and no allocation, which is every delivery while a type has one version.
func DataAt(versions EventVersions, eventType string, data json.RawMessage, from, to int) (json.RawMessage, error) {
	if to == 0 || to >= from {
		return data, nil
	}
	if to < 1 {
		return nil, fmt.Errorf("%s version %d: %w", eventType, to, ErrNoVersion)
	}
	if versions == nil {
		return nil, fmt.Errorf("%s version %d to %d: no table of event versions was given", eventType, from, to)
	}
	return versions.Downgrade(eventType, data, from, to)
}

// VersionOf is the version of eventType's data that w receives: its own version for its event type,
// 0 (the event's data as written) for any other (the test event, a notice).
func (w *Webhook) VersionOf(eventType string) int {
	if eventType != w.EventType {
		return 0
	}
	return w.Version
}

// DataFor is ev's data as webhook w receives it: converted down by versions to w's version of ev's
// type (DataAt). Build w's body from it.
func (ev *Event) DataFor(versions EventVersions, w *Webhook) (json.RawMessage, error) {
	return ev.DataAt(versions, w.VersionOf(ev.EventType))
}

// DataAt is ev's data in version (0: as written), converted by versions, see DataAt.
func (ev *Event) DataAt(versions EventVersions, version int) (json.RawMessage, error) {
	return DataAt(versions, ev.EventType, json.RawMessage(ev.Data), ev.Version, version)
}
