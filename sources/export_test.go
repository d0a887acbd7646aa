package sources

import (
	"encoding/json"
	"reflect"
	"testing"
)

// AddVersion adds the next version of eventType for the duration of the test: its fields read from
// T's tags as eventData's are, down converting its data to the version before. The test must not
// run in parallel with others that read the versions.
func AddVersion[T any](t testing.TB, eventType string, down func(json.RawMessage) (json.RawMessage, error)) {
	t.Helper()
	t.Cleanup(addVersion(eventType, reflect.TypeFor[T](), down))
}

// CheckDowns is checkDowns: each version's example, converted down, is valid data of every older
// version.
var CheckDowns = checkDowns

// Object is object, the ordered JSON object a down function edits.
type Object = object

// DecodeObject is decodeObject.
var DecodeObject = decodeObject

func (o *object) Get(name string) json.RawMessage    { return o.get(name) }
func (o *object) Set(name string, v json.RawMessage) { o.set(name, v) }
func (o *object) Remove(name string)                 { o.remove(name) }
func (o *object) Encode() json.RawMessage            { return o.encode() }

// SetThreshold is setThreshold, for the tests that set thresholds on a database directly.
var SetThreshold = setThreshold
