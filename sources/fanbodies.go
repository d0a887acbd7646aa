package sources

import "encoding/json"

// The bodies of the fan intake (POST /websites/<id>/leads, /presaves and /analytics), typed in
// docs/openapi.yaml from the table intake validates with. A lead's body is Lead and a pre-save's
// Presave, the event data without the website's ids; the handler decodes the body into the struct
// (a field left out, or null, is its zero value), Lead.Normalize brings the lead to the event's
// rules, and the event data is validated by the table. So a field whose zero value the table
// accepts may be left out or null, and one whose zero value it refuses is required and not
// nullable; a phone may be national (Normalize reads it in source.country). TestFanBodiesAgreeWithIntake
// in package api holds the document to the handlers.

// MaxIncrement is the largest increment of one POST /websites/<id>/analytics.
const MaxIncrement = 1_000_000

// fanBodyComponents are the schemas of the fan intake bodies in OpenAPI 3.0, by component name.
func fanBodyComponents() map[string]any {
	lead := bodySchema(shapeOf[Lead]())
	lead["title"] = "LeadReport"
	lead["description"] = "A lead as a website's form reports it: lead.captured's data without the website's ids (LeadCapturedData)."
	presave := bodySchema(shapeOf[Presave]())
	presave["title"] = "PresaveReport"
	presave["description"] = "A pre-save: presave.completed's data without the website's ids (PresaveCompletedData)."
	return map[string]any{
		"LeadReport":    lead,
		"PresaveReport": presave,
		"AnalyticsCount": map[string]any{
			"title":       "AnalyticsCount",
			"description": "An addition to a website's counter. signups is counted by webhookd, from leads and pre-saves.",
			"type":        "object",
			"properties": map[string]any{
				"metric":    map[string]any{"type": "string", "enum": stringsToAny(CountedMetrics)},
				"increment": map[string]any{"type": "integer", "format": "int64", "minimum": 1, "maximum": MaxIncrement},
			},
			"required":             []string{"metric", "increment"},
			"additionalProperties": false,
		},
	}
}

// bodySchema is the schema of a body decoded into the struct whose fields are fields.
func bodySchema(fields []field) map[string]any {
	props := make(map[string]any, len(fields))
	required := []string{}
	for _, f := range fields {
		var s map[string]any
		switch f.kind {
		case kindObject:
			s = bodySchema(f.fields)
		case kindPhone:
			s = map[string]any{"type": "string", "minLength": 1, "pattern": notNUL,
				"description": "E.164 (+14155550123), or a national number read in source.country; the event carries it in E.164."}
		default:
			s = fieldSchema(f, OpenAPI30)
		}
		if zeroAccepted(f) {
			if !f.nullable {
				nullable(s, OpenAPI30) // null decodes as the zero value, which intake takes
			}
		} else {
			required = append(required, f.name)
		}
		props[f.name] = s
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required // OpenAPI 3.0: an empty list is not allowed
	}
	return s
}

// zeroAccepted reports whether intake accepts f's zero value: what the handler reads for a field
// left out or null.
func zeroAccepted(f field) bool {
	var zero any
	switch f.kind {
	case kindObject:
		for _, sub := range f.fields {
			if !zeroAccepted(sub) {
				return false
			}
		}
		return true
	case kindStringMap:
		return true // Lead.Normalize makes none an empty object
	case kindID, kindCount, kindNumber:
		zero = json.Number("0")
	case kindBool:
		zero = false
	default:
		zero = ""
	}
	return f.nullable || checkValue(f.name, zero, f) == nil
}
