package sources

import (
	"fmt"
	"math"
	"slices"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// The JSON Schemas of event data and of delivery bodies (docs/events.md, "Schemas"), generated from
// eventData, the table intake validates against, so that a schema and intake cannot disagree: every
// listed field required, no other field allowed, each kind's rule written as a schema keyword.

// Dialect is the schema language a schema is written in.
type Dialect int

const (
	// JSONSchema is JSON Schema 2020-12: what GET <prefix>/event-types and /schemas/ serve and
	// OpenAPI 3.1 (docs/webhooks.yaml) embeds. null is a type of its own.
	JSONSchema Dialect = iota
	// OpenAPI30 is OpenAPI 3.0's Schema Object, docs/openapi.yaml's components: no $schema, no
	// const, and null said with nullable.
	OpenAPI30
)

// JSONSchemaDialect is the $schema of JSONSchema's schemas.
const JSONSchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// Patterns of the schemas. They are ECMA-262 regular expressions, as JSON Schema asks, written with
// the part of the syntax Go's RE2 reads alike, so validators in both agree.
const (
	// notNUL: intake refuses U+0000 in every string (input.SafeText).
	notNUL = `^[^\x00]*$`
	// textPattern: a text has a character other than white space, and no U+0000.
	textPattern = `^[^\x00]*[^\x00\s][^\x00]*$`
	// datePart: a year from 0001 to 9999, a month from 01 to 12 and a day that month has, the 29th
	// of February in every year (a pattern does not count leap years: intake refuses 2026-02-29,
	// and so does format: date-time where a validator asserts formats).
	datePart = `([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-` +
		`((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-9])|(0[13-9]|1[0-2])-30|(0[13578]|1[02])-31)`
	// clockPart: 00:00:00 to 23:59:59; no leap second, which Go's time.Parse refuses.
	clockPart = `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]`
	// timePattern: RFC 3339 as Go's time.Parse reads it, years 0001 to 9999, an offset of at most
	// 23:59 (time.Parse would take +24:00; intake checks this pattern too).
	timePattern = `^` + datePart + `T` + clockPart + `(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	// timeMillisSchemaPattern: UTC with exactly three decimals, years 0001 to 9999.
	timeMillisSchemaPattern = `^` + datePart + `T` + clockPart + `\.[0-9]{3}Z$`
	// timeSecondsPattern: variant B's delivery timestamp, UTC without a fraction (spec 6.1).
	timeSecondsPattern = `^` + datePart + `T` + clockPart + `Z$`
	// urlPattern: an absolute http(s) URL with a host; the scheme's case is free, as url.Parse's.
	// No control character anywhere, as url.Parse refuses them.
	urlPattern = `^[hH][tT][tT][pP][sS]?://[^/?#\s\x00-\x1f\x7f]+([/?#][^\x00-\x1f\x7f]*)?$`
	// addressPattern: urlPattern, or a broker's address (kindAddress).
	addressPattern = `^([hH][tT][tT][pP][sS]?|[nN][aA][tT][sS]|[tT][lL][sS]|[aA][mM][qQ][pP][sS]?|[kK][aA][fF][kK][aA](\+[tT][lL][sS])?)://[^/?#\s\x00-\x1f\x7f]+([/?#][^\x00-\x1f\x7f]*)?$`
	// emailPattern: one @ and a dotted domain that neither starts nor ends with a dot (ValidEmail).
	emailPattern = `^[^@\s]+@[^@\s.][^@\s]*\.[^@\s]*[^@\s.]$`
	// signaturePattern: variant B's body signature.
	signaturePattern = `^sha256=[0-9a-f]{64}$`
)

// DataSchema is the schema of eventType's data in version (docs/events.md, "Versions") in dialect
// d, and false for a type or version intake does not know. Its title is the type; its description
// the catalog's.
func DataSchema(eventType string, version int, d Dialect) (map[string]any, bool) {
	fields, ok := shape(eventType, version)
	if !ok {
		return nil, false
	}
	s := objectSchema(fields, d)
	s["title"] = eventType
	if desc := eventDescription(eventType); desc != "" {
		s["description"] = desc
	}
	if d == JSONSchema {
		s["$schema"] = JSONSchemaDialect
	}
	return s, true
}

// eventDescription is what eventType means, webhook.test's included.
func eventDescription(eventType string) string {
	if eventType == model.EventTest {
		return "A test event: sent after a webhook's registration (variant B) and on request, to that webhook alone."
	}
	return eventDescriptions[eventType]
}

// EnvelopeSchema is the schema of the delivery body of layout l (wire.LayoutA or wire.LayoutB)
// carrying eventType's data in its newest version, or any event's data when eventType is "". The
// fields are the body's, in its order; the type names the event when one is given.
func EnvelopeSchema(l wire.Layout, eventType string, d Dialect) (map[string]any, error) {
	data := map[string]any{"type": "object", "description": "The event's data; its schema is the event type's."}
	typeName := map[string]any{"type": "string", "description": "The event type."}
	if eventType != "" {
		ds, ok := DataSchema(eventType, LatestVersion(eventType), d)
		if !ok {
			return nil, fmt.Errorf("no schema for event type %q", eventType)
		}
		delete(ds, "$schema")
		data = ds
		if d == JSONSchema {
			typeName["const"] = eventType
		} else {
			typeName["enum"] = []any{eventType}
		}
	}
	var props map[string]any
	var order []string
	switch l {
	case wire.LayoutA:
		order = []string{"eventType", "data", "timestamp"}
		props = map[string]any{
			"eventType": typeName,
			"data":      data,
			"timestamp": map[string]any{"type": "string", "format": "date-time", "pattern": timeMillisSchemaPattern, "description": "When webhookd accepted the event: ISO 8601 UTC with milliseconds."},
		}
	case wire.LayoutB:
		order = []string{"event", "timestamp", "data", "signature"}
		props = map[string]any{
			"event":     typeName,
			"timestamp": map[string]any{"type": "string", "format": "date-time", "pattern": timeSecondsPattern, "description": "When webhookd accepted the event: ISO 8601 UTC, no fractional seconds."},
			"data":      data,
			"signature": map[string]any{"type": "string", "pattern": signaturePattern, "description": "sha256=<hex>: HMAC-SHA256 with the webhook's secret over the body without this field (docs/signatures.md)."},
		}
	default:
		return nil, fmt.Errorf("no envelope schema for layout %q", l)
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             order,
		"additionalProperties": false,
		"title":                "Delivery body, variant " + string(l),
	}
	if eventType != "" {
		s["title"] = fmt.Sprintf("%s delivery, variant %s", eventType, l)
	}
	if d == JSONSchema {
		s["$schema"] = JSONSchemaDialect
	}
	return s, nil
}

func objectSchema(fields []field, d Dialect) map[string]any {
	props := make(map[string]any, len(fields))
	required := make([]string, 0, len(fields))
	for _, f := range fields {
		props[f.name] = fieldSchema(f, d)
		if !f.optional {
			required = append(required, f.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// fieldSchema is f's rule (checkValue's and checkString's) as a schema.
func fieldSchema(f field, d Dialect) map[string]any {
	var s map[string]any
	switch f.kind {
	case kindID:
		s = map[string]any{"type": "integer", "minimum": 1, "maximum": input.MaxSafeInteger}
	case kindCount:
		s = map[string]any{"type": "integer", "minimum": 0, "maximum": input.MaxSafeInteger}
	case kindNumber:
		// Finite: a float64, which is what a canonical body holds.
		s = map[string]any{"type": "number", "minimum": -math.MaxFloat64, "maximum": math.MaxFloat64}
	case kindString:
		s = map[string]any{"type": "string", "pattern": notNUL}
	case kindText:
		s = map[string]any{"type": "string", "minLength": 1, "pattern": textPattern}
	case kindBool:
		s = map[string]any{"type": "boolean"}
	case kindTime:
		s = map[string]any{"type": "string", "format": "date-time", "pattern": timePattern}
	case kindTimeMillis:
		s = map[string]any{"type": "string", "pattern": timeMillisSchemaPattern}
		if d == JSONSchema {
			// Not in OpenAPI 3.0: generators make a date-time a time value, which writes no
			// milliseconds when they are zero, and intake would refuse what the client sends.
			s["format"] = "date-time"
		}
	case kindURL:
		s = map[string]any{"type": "string", "pattern": urlPattern, "description": "An absolute http(s) URL."}
	case kindAddress:
		s = map[string]any{"type": "string", "pattern": addressPattern,
			"description": "The webhook's address: an absolute http(s) URL, or a broker's in its kind's scheme (nats, tls, amqp, amqps, kafka, kafka+tls; docs/destinations.md)."}
	case kindEmail:
		s = map[string]any{"type": "string", "format": "email", "pattern": emailPattern}
	case kindPhone:
		s = map[string]any{"type": "string", "pattern": e164Pattern.String(), "description": "E.164"}
	case kindIP:
		s = map[string]any{"type": "string", "description": "An IPv4 or IPv6 address."}
		if d == JSONSchema {
			// OpenAPI 3.0 generators read anyOf as a union type: there the description says it.
			s["anyOf"] = []any{map[string]any{"format": "ipv4"}, map[string]any{"format": "ipv6"}}
		}
	case kindStringMap:
		s = map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string", "pattern": notNUL}}
		if d == JSONSchema {
			s["propertyNames"] = map[string]any{"pattern": notNUL}
		}
	case kindObject:
		s = objectSchema(f.fields, d)
	case kindEnum:
		s = map[string]any{"type": "string", "enum": stringsToAny(f.enum)}
	default:
		panic(fmt.Sprintf("no schema for field %s of kind %d", f.name, f.kind))
	}
	if d == OpenAPI30 {
		// OpenAPI's formats give generators the width: a number without one is a float32 in Go.
		switch s["type"] {
		case "integer":
			s["format"] = "int64"
		case "number":
			s["format"] = "double"
		}
	}
	if f.nullable {
		nullable(s, d)
	}
	return s
}

// nullable lets s also be null.
func nullable(s map[string]any, d Dialect) {
	if d == OpenAPI30 {
		s["nullable"] = true
	} else {
		s["type"] = []any{s["type"], "null"}
	}
	if e, ok := s["enum"].([]any); ok {
		s["enum"] = append(e, nil)
	}
	// pattern, format and the other string keywords pass a null as they pass any non-string.
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// SchemaTypes are the event types DataSchema knows: every subscribable type of both variants and
// webhook.test, sorted.
func SchemaTypes() []string {
	types := make([]string, 0, len(eventData))
	for t := range eventData {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}
