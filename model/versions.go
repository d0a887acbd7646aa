package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
)

// EventVersions is what the engine knows of the versions of event types' data (docs/events.md,
// "Versions"): the newest version of a type, and how data of one version reads in an older one.
// The shapes and their conversions are package sources's, which model cannot import; sources
// registers its table at init (SetEventVersions), and every process that publishes or delivers
// (the API, the worker, the portal, the operator's CLI) links sources. Without a registration
// every type has one version, version 1, and nothing can be converted.
type EventVersions interface {
	// Latest is the newest version of eventType's data; 0 for a type it does not know (notices,
	// whose data has one version).
	Latest(eventType string) int
	// Downgrade converts data (canonical JSON) of version from to version to, from > to >= 1,
	// returning canonical JSON.
	Downgrade(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error)
}

// eventVersions holds the registered EventVersions, nil until one is.
var eventVersions atomic.Pointer[EventVersions]

// SetEventVersions registers the versions of the event types: package sources calls it once, in
// its init, with its own table. It is a process-wide registration because that table is part of the
// program, as the variant table is: it does not change at run time, and every publish path
// (model.Change, InsertEvent, notices) and the delivery activity read it without a parameter
// threaded through them. It returns the table it replaces (nil: none), for a test to put back.
func SetEventVersions(v EventVersions) (previous EventVersions) {
	if p := eventVersions.Swap(&v); p != nil {
		return *p
	}
	return nil
}

// LatestVersion is the newest version of eventType's data: what intake accepts and emitters write,
// and what a new webhook receives unless it pins another. 1 for a type without versions.
func LatestVersion(eventType string) int {
	if v := eventVersions.Load(); v != nil {
		if n := (*v).Latest(eventType); n > 0 {
			return n
		}
	}
	return 1
}

// ErrNoVersion: data asked for in a version newer than the one it is written in (a version is
// never converted up), or below 1.
var ErrNoVersion = errors.New("no such version of the event's data")

// DataAt is data, of eventType and written in version from, as it reads in version to. Data is
// never converted up: a to of 0 or at least from gives data as it is, with no decoding and no
// allocation, which is every delivery while a type has one version.
func DataAt(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error) {
	if to == 0 || to >= from {
		return data, nil
	}
	if to < 1 {
		return nil, fmt.Errorf("%s version %d: %w", eventType, to, ErrNoVersion)
	}
	v := eventVersions.Load()
	if v == nil {
		return nil, fmt.Errorf("%s version %d to %d: no event versions are registered (model.SetEventVersions)", eventType, from, to)
	}
	return (*v).Downgrade(eventType, data, from, to)
}

// VersionOf is the version of eventType's data that w receives: its own version for its event type,
// 0 (the event's data as written) for any other (the test event, a notice).
func (w *Webhook) VersionOf(eventType string) int {
	if eventType != w.EventType {
		return 0
	}
	return w.Version
}

// DataFor is ev's data as webhook w receives it: converted down to w's version of ev's type
// (DataAt). Build w's body from it.
func (ev *Event) DataFor(w *Webhook) (json.RawMessage, error) {
	return ev.DataAt(w.VersionOf(ev.EventType))
}

// DataAt is ev's data in version (0: as written), see DataAt.
func (ev *Event) DataAt(version int) (json.RawMessage, error) {
	return DataAt(ev.EventType, json.RawMessage(ev.Data), ev.Version, version)
}
