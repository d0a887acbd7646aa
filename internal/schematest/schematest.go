// Package schematest compiles the JSON Schemas webhookd generates and validates JSON against them,
// formats asserted as a strict receiver would, for the tests that hold the schemas to intake and
// to the bodies really sent.
package schematest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles schema, a generated schema (a map) or its JSON bytes, failing t if it does not.
func Compile(t testing.TB, schema any) *jsonschema.Schema {
	t.Helper()
	raw, ok := schema.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			t.Fatal(err)
		}
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", Instance(t, raw)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile: %v\n%s", err, raw)
	}
	return sch
}

// Instance decodes raw as the validator reads JSON (numbers exact), failing t if it is not JSON.
func Instance(t testing.TB, raw []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// Validate validates the JSON raw against sch.
func Validate(t testing.TB, sch *jsonschema.Schema, raw []byte) error {
	t.Helper()
	return sch.Validate(Instance(t, raw))
}
