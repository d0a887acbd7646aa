package sources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/wire"
)

// dataCase is event data derived from a type's example by one change, and whether intake accepts it.
type dataCase struct {
	name string
	data map[string]any
}

// mutations are the changes tried on each field: values of other kinds, and each kind's edge values.
func mutations(f field) map[string]any {
	m := map[string]any{
		"null": nil, "true": true, "number 7": json.Number("7"), "string": "x", "object": map[string]any{}, "array": []any{},
		"empty string": "", "blank string": "  \t", "NUL": "a\x00b",
	}
	switch f.kind {
	case kindID, kindCount, kindNumber:
		for _, n := range []string{"0", "1", "-1", "1.5", "1e2", "1.0", "9007199254740991", "9007199254740992", "-9007199254740992", "1e400"} {
			m["number "+n] = json.Number(n)
		}
	case kindTime, kindTimeMillis:
		for _, s := range []string{"2026-05-01T12:00:00Z", "2026-05-01T12:00:00.000Z", "2026-05-01T12:00:00.5Z", "2026-05-01T12:00:00+02:00",
			"2026-05-01T12:00:00.000+02:00", "2026-05-01 12:00:00Z", "2026-05-01", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
			"0000-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z", "2026-05-01T25:00:00Z", "2026-05-01T12:00:00.0000Z"} {
			m["time "+s] = s
		}
	case kindURL:
		for _, s := range []string{"https://example.com/", "http://example.com", "HTTPS://EXAMPLE.COM/a?b#c", "ftp://example.com/", "example.com",
			"https:///path", "https://example.com/a b", "https://exa mple.com/", "https://example.com/\x01", "/relative", "https://"} {
			m["url "+s] = s
		}
	case kindEmail:
		for _, s := range []string{"fan@example.com", "a.b+c@sub.example.org", "fan@example", "@example.com", "fan@.example.com", "fan@example.com.",
			"two@@example.com", "fan @example.com", "Fan <fan@example.com>", "fan@exa mple.com"} {
			m["email "+s] = s
		}
	case kindPhone:
		for _, s := range []string{"+14155550123", "+1", "+12", "14155550123", "+0123456", "+1234567890123456", "+1 415 555 0123"} {
			m["phone "+s] = s
		}
	case kindIP:
		for _, s := range []string{"203.0.113.7", "::1", "2001:db8::1", "256.0.0.1", "1.2.3", "example.com", "::ffff:1.2.3.4"} {
			m["ip "+s] = s
		}
	case kindEnum:
		for _, s := range append([]string{"PageViews", "other"}, f.enum...) {
			m["enum "+s] = s
		}
	case kindStringMap:
		m["map of strings"] = map[string]any{"a": "b", "": ""}
		m["map with a number"] = map[string]any{"a": json.Number("1")}
		m["map with null"] = map[string]any{"a": nil}
		m["map with NUL value"] = map[string]any{"a": "\x00"}
		m["map with NUL key"] = map[string]any{"\x00": "a"}
	}
	return m
}

// cases derives, from fields' example, a case per field and mutation, per missing field, and with
// an extra field, recursing into nested objects.
func cases(path string, fields []field, example map[string]any, set func(map[string]any) map[string]any) []dataCase {
	clone := func() map[string]any {
		var c map[string]any
		raw, _ := json.Marshal(example)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&c)
		return c
	}
	var out []dataCase
	out = append(out, dataCase{path + " with an extra field", set(func() map[string]any { c := clone(); c["extra"] = "x"; return c }())})
	for _, f := range fields {
		c := clone()
		delete(c, f.name)
		out = append(out, dataCase{path + "." + f.name + " missing", set(c)})
		for name, v := range mutations(f) {
			c := clone()
			c[f.name] = v
			out = append(out, dataCase{path + "." + f.name + " = " + name, set(c)})
		}
		if f.kind == kindObject {
			sub := clone()[f.name].(map[string]any)
			out = append(out, cases(path+"."+f.name, f.fields, sub, func(inner map[string]any) map[string]any {
				c := clone()
				c[f.name] = inner
				return set(c)
			})...)
		}
	}
	return out
}

// TestDataSchemasAgreeWithIntake: for every event type, the example passes both its schema and
// intake, and every case derived from it (a field missing, an extra field, each field given values
// of every other kind and its kind's edge values) is accepted by the schema exactly when intake
// accepts it.
func TestDataSchemasAgreeWithIntake(t *testing.T) {
	accepted, refused := 0, 0
	for _, typ := range SchemaTypes() {
		s, ok := DataSchema(typ, 1, JSONSchema)
		if !ok {
			t.Fatalf("no schema for %s", typ)
		}
		sch := schematest.Compile(t, s)
		example := exampleObject(eventData[typ])
		raw, _ := json.Marshal(example)
		if err := sch.Validate(schematest.Instance(t, raw)); err != nil {
			t.Errorf("%s: the catalog's example fails its schema: %v", typ, err)
		}
		for _, c := range cases(typ, eventData[typ], example, func(m map[string]any) map[string]any { return m }) {
			raw, err := json.Marshal(c.data)
			if err != nil {
				t.Fatal(err)
			}
			intakeErr := ValidateEventData(typ, raw)
			schemaErr := sch.Validate(schematest.Instance(t, raw))
			if intakeErr == nil {
				accepted++
			} else {
				refused++
			}
			if (intakeErr == nil) != (schemaErr == nil) {
				t.Errorf("%s: intake says %v, the schema says %v", c.name, errText(intakeErr), errText(schemaErr))
			}
		}
	}
	t.Logf("%d cases intake accepts, %d it refuses", accepted, refused)
	if accepted < 50 || refused < 500 {
		t.Errorf("too few cases: %d accepted, %d refused", accepted, refused)
	}
}

func errText(err error) string {
	if err == nil {
		return "valid"
	}
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s
}

// TestEnvelopeSchemasValidateDeliveryBodies: the bodies wire builds for each variant pass their
// envelope schemas, with and without a type's data schema inside, and a body broken in each field
// fails.
func TestEnvelopeSchemasValidateDeliveryBodies(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 123_000_000, time.UTC)
	for _, l := range []wire.Layout{wire.LayoutA, wire.LayoutB} {
		for _, typ := range SchemaTypes() {
			data, err := json.Marshal(exampleObject(eventData[typ]))
			if err != nil {
				t.Fatal(err)
			}
			canonical, err := wire.CanonicalJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			body := wire.Body(l, typ, canonical, at, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
			for _, withType := range []string{"", typ} {
				s, err := EnvelopeSchema(l, withType, JSONSchema)
				if err != nil {
					t.Fatal(err)
				}
				sch := schematest.Compile(t, s)
				if err := sch.Validate(schematest.Instance(t, body)); err != nil {
					t.Errorf("%s body of %s fails the envelope (type %q): %v\n%s", l, typ, withType, err, body)
				}
				var m map[string]any
				_ = json.Unmarshal(body, &m)
				for k := range m {
					broken := map[string]any{}
					for k2, v := range m {
						broken[k2] = v
					}
					broken[k] = 7
					raw, _ := json.Marshal(broken)
					if sch.Validate(schematest.Instance(t, raw)) == nil {
						t.Errorf("%s body with %s = 7 passes the envelope (type %q)", l, k, withType)
					}
				}
			}
			other := "campaign.created"
			if typ == other {
				other = "lead.captured"
			}
			s, _ := EnvelopeSchema(l, other, JSONSchema)
			if schematest.Compile(t, s).Validate(schematest.Instance(t, body)) == nil {
				t.Errorf("%s body of %s passes %s's envelope", l, typ, other)
			}
		}
	}
}

// TestOpenAPI30SchemasSayNullWithNullable: the OpenAPI 3.0 dialect has no type arrays and no
// $schema; a nullable field says nullable.
func TestOpenAPI30SchemasSayNullWithNullable(t *testing.T) {
	s, _ := DataSchema("presave.completed", 1, OpenAPI30)
	raw, _ := json.Marshal(s)
	if bytes.Contains(raw, []byte(`"null"`)) || bytes.Contains(raw, []byte(`$schema`)) || bytes.Contains(raw, []byte(`"const"`)) {
		t.Errorf("not OpenAPI 3.0: %s", raw)
	}
	fan := s["properties"].(map[string]any)["fanEmail"].(map[string]any)
	if fan["nullable"] != true || fan["type"] != "string" {
		t.Errorf("fanEmail = %v", fan)
	}
	j, _ := DataSchema("presave.completed", 1, JSONSchema)
	if got := fmt.Sprint(j["properties"].(map[string]any)["fanEmail"].(map[string]any)["type"]); got != "[string null]" {
		t.Errorf("JSON Schema fanEmail type = %s", got)
	}
}
