package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// Versions of event types' data (docs/events.md, "Versions"). Version 1 of every type is its
// table in eventData. A breaking change of a type's data is a new version: its field table, read
// from a struct as eventData's are, and down, a pure function from data of that version to data of
// the one before. Intake accepts the newest version only and emitters write it; a webhook pinned
// to an older version gets every event converted down, one version at a time.
//
// No type has a second version yet; a test adds one (addVersion).

// version is version n > 1 of an event type's data.
type version struct {
	fields []field
	// down converts data of this version to the version before it: canonical JSON in (as stored,
	// already valid for fields), canonical JSON out, valid for the previous version's fields. It
	// must be pure: deliveries, retries and the portal's view of a body each call it again.
	down func(data json.RawMessage) (json.RawMessage, error)
}

// laterVersions holds, per event type, its versions after 1 in order (index 0 is version 2). It is
// replaced, never changed in place, so that readers need no lock.
var laterVersions atomic.Pointer[map[string][]version]

func init() {
	laterVersions.Store(&map[string][]version{})
}

// Versions is the versions table as the engine reads it (model.EventVersions): the process's
// composition root (cmd/webhookd, a test's harness) hands it to what publishes and delivers
// (webhooks.Config, activities.Activities). Nothing registers it: a service not given it knows
// one version of each type and converts nothing.
func Versions() model.EventVersions { return registry{} }

// registry is the versions table as model reads it (Versions).
type registry struct{}

func (registry) Latest(eventType string) int { return LatestVersion(eventType) }

func (registry) Downgrade(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error) {
	return downgrade(eventType, data, from, to)
}

// LatestVersion is the newest version of eventType's data (1 for a type with no later version), 0
// for a type that is not an event type.
func LatestVersion(eventType string) int {
	if _, ok := eventData[eventType]; !ok {
		return 0
	}
	return 1 + len((*laterVersions.Load())[eventType])
}

// VersionsOf lists the versions of eventType's data, oldest first; none for an unknown type.
func VersionsOf(eventType string) []int {
	n := LatestVersion(eventType)
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// shape is the field table of eventType's data in version n, false when there is no such type or
// version. Everything that reads a shape (intake's validation, the catalog's examples, the JSON
// Schema) reads it here, per version.
func shape(eventType string, n int) ([]field, bool) {
	v1, ok := eventData[eventType]
	switch {
	case !ok || n < 1:
		return nil, false
	case n == 1:
		return v1, true
	}
	later := (*laterVersions.Load())[eventType]
	if n-2 >= len(later) {
		return nil, false
	}
	return later[n-2].fields, true
}

// newestShape is the field table of eventType's newest version: what intake validates.
func newestShape(eventType string) ([]field, bool) {
	return shape(eventType, LatestVersion(eventType))
}

// downgrade converts data of eventType from version from down to version to, one version at a
// time, each result canonical JSON.
func downgrade(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error) {
	later := (*laterVersions.Load())[eventType]
	if to < 1 || from > 1+len(later) || to > from {
		return nil, fmt.Errorf("%s version %d to %d: %w", eventType, from, to, model.ErrNoVersion)
	}
	for n := from; n > to; n-- {
		out, err := later[n-2].down(data)
		if err != nil {
			return nil, fmt.Errorf("convert %s version %d to %d: %w", eventType, n, n-1, err)
		}
		canonical, err := wire.CanonicalJSON(out)
		if err != nil {
			return nil, fmt.Errorf("convert %s version %d to %d: %w", eventType, n, n-1, err)
		}
		data = canonical
	}
	return data, nil
}

// addVersion adds the next version of eventType, its fields read from struct type t as eventData's
// are, and returns the function that removes it again (the last added first). Only tests add one
// at run time; a real version is added to the table at init, beside eventData.
func addVersion(eventType string, t reflect.Type, down func(json.RawMessage) (json.RawMessage, error)) (remove func()) {
	if _, ok := eventData[eventType]; !ok {
		panic(fmt.Sprintf("addVersion: unknown event type %q", eventType))
	}
	v := version{fields: fieldsOf(t), down: down}
	next := maps.Clone(*laterVersions.Load())
	next[eventType] = append(slices.Clip(next[eventType]), v)
	laterVersions.Store(&next)
	return func() {
		prev := maps.Clone(*laterVersions.Load())
		if n := len(prev[eventType]); n > 0 {
			prev[eventType] = prev[eventType][:n-1]
		}
		if len(prev[eventType]) == 0 {
			delete(prev, eventType)
		}
		laterVersions.Store(&prev)
	}
}

// AddVersionForTest adds the next version of eventType, its fields read from T's tags as eventData's
// are, down converting its data to the version before, and returns the function that removes it
// (addVersion). It is for a test outside this package that checks a program hands sources' table on
// (cmd/webhookd's wiring); the program never calls it. The test must not run in parallel with
// others that read the versions.
func AddVersionForTest[T any](eventType string, down func(json.RawMessage) (json.RawMessage, error)) (remove func()) {
	return addVersion(eventType, reflect.TypeFor[T](), down)
}

// object is a JSON object with its members in order: what a down function edits, so that the
// fields it keeps stay in their order (receivers get fields in the documented order, and canonical
// JSON keeps the order it is given).
type object struct {
	names  []string
	values map[string]json.RawMessage
}

// decodeObject reads data, a JSON object, keeping the order of its members.
func decodeObject(data json.RawMessage) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("data is not a JSON object")
	}
	o := &object{values: map[string]json.RawMessage{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.values[name]; !dup {
			o.names = append(o.names, name)
		}
		o.values[name] = v
	}
	return o, nil
}

// get is the value of member name, nil when there is none.
func (o *object) get(name string) json.RawMessage { return o.values[name] }

// set gives member name the value v, in its place, or last when it is new.
func (o *object) set(name string, v json.RawMessage) {
	if _, ok := o.values[name]; !ok {
		o.names = append(o.names, name)
	}
	o.values[name] = v
}

// remove removes member name, if there is one.
func (o *object) remove(name string) {
	if _, ok := o.values[name]; ok {
		delete(o.values, name)
		o.names = slices.DeleteFunc(o.names, func(n string) bool { return n == name })
	}
}

// encode writes the object, its members in order.
func (o *object) encode() json.RawMessage {
	b := []byte{'{'}
	for i, name := range o.names {
		if i > 0 {
			b = append(b, ',')
		}
		key, _ := json.Marshal(name) // a string always marshals
		b = append(append(append(b, key...), ':'), o.values[name]...)
	}
	return append(b, '}')
}

// checkDowns checks eventType's conversions: the example of each version n > 1 (exampleObject, the
// catalog's), converted down, is valid data of version n-1, and so on down to version 1.
func checkDowns(eventType string) error {
	for n := LatestVersion(eventType); n > 1; n-- {
		fields, _ := shape(eventType, n)
		ex, err := json.Marshal(exampleObject(fields))
		if err != nil {
			return err
		}
		data, err := wire.CanonicalJSON(ex)
		if err != nil {
			return err
		}
		for to := n - 1; to >= 1; to-- {
			down, err := downgrade(eventType, data, n, to)
			if err != nil {
				return err
			}
			prev, _ := shape(eventType, to)
			if err := validate(down, prev); err != nil {
				return fmt.Errorf("%s version %d converted to %d: %w", eventType, n, to, err)
			}
		}
	}
	return nil
}
