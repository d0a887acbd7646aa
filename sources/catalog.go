package sources

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/webhookd/webhookd/model"
)

// eventDescriptions says what each event type means; the event-type catalog serves it beside an
// example built from eventData, the table intake validates against.
var eventDescriptions = map[string]string{
	"campaign.created":    "A campaign was created.",
	"campaign.updated":    "A campaign's details changed.",
	"campaign.processing": "A campaign started running on its platform.",
	"campaign.completed":  "A campaign finished.",
	"campaign.failed":     "A campaign failed on its platform.",
	"website.published":   "A website was published, at once or at its scheduled time (scheduledPublish).",
	"website.archived":    "A website was archived and is no longer served.",
	"lead.captured":       "A visitor left their contact details on a website's form.",
	"presave.completed":   "A fan pre-saved a release, with what they agreed to (boosts).",
	"analytics.threshold": "A website's metric reached a threshold set for it.",
}

// EventTypeInfo is one entry of the event-type catalog: Version is the type's newest version, the
// one intake accepts, Example is data of it, and Versions lists every version a webhook may pin
// (docs/events.md, "Versions").
type EventTypeInfo struct {
	Type        string          `json:"type"`
	Description string          `json:"description"`
	Version     int             `json:"version"`
	Versions    []int           `json:"versions"`
	Example     json.RawMessage `json:"example"`
	// Schema is the JSON Schema (2020-12) of the type's data, generated from the same table.
	Schema json.RawMessage `json:"schema"`
	// SchemaURL is the path of the schema's stable URL on the API's host (SchemaPath).
	SchemaURL string `json:"schemaUrl"`
}

// SchemaPath is the path at which the API serves the JSON Schema of version's data of eventType,
// public and stable: /schemas/events/<type>/v<version>.json.
func SchemaPath(eventType string, version int) string {
	return "/schemas/events/" + eventType + "/v" + strconv.Itoa(version) + ".json"
}

// EventCatalog lists the event types a webhook of variant v may subscribe to, each with its
// description, its versions, and an example of its newest version's data and that version's schema,
// built from the same field table that validates events at intake, so the example always passes that
// validation and the schema states it.
func EventCatalog(v model.Variant) []EventTypeInfo {
	types := v.EventTypes()
	out := make([]EventTypeInfo, len(types))
	for i, t := range types {
		fields, _ := newestShape(t)
		ex, err := json.Marshal(exampleObject(fields))
		if err != nil {
			panic(fmt.Sprintf("example of %s: %v", t, err)) // built from literals: cannot fail
		}
		latest := LatestVersion(t)
		schema, _ := DataSchema(t, latest, JSONSchema)
		sch, err := json.Marshal(schema)
		if err != nil {
			panic(fmt.Sprintf("schema of %s: %v", t, err)) // built from literals: cannot fail
		}
		out[i] = EventTypeInfo{Type: t, Description: eventDescriptions[t], Version: latest, Versions: VersionsOf(t),
			Example: ex, Schema: sch, SchemaURL: SchemaPath(t, latest)}
	}
	return out
}

func exampleObject(fields []field) map[string]any {
	obj := make(map[string]any, len(fields))
	for _, f := range fields {
		obj[f.name] = exampleValue(f)
	}
	return obj
}

// exampleValue is a valid value of f's kind.
func exampleValue(f field) any {
	switch f.kind {
	case kindID:
		return 42
	case kindCount:
		return 1000
	case kindNumber:
		return 2500.5
	case kindString, kindText:
		return "example"
	case kindBool:
		return true
	case kindTime:
		return "2026-05-01T12:00:00Z"
	case kindTimeMillis:
		return "2026-05-01T12:00:00.000Z"
	case kindURL, kindAddress:
		return "https://example.com/"
	case kindEmail:
		return "fan@example.com"
	case kindPhone:
		return "+14155550123"
	case kindIP:
		return "203.0.113.7"
	case kindStringMap:
		return map[string]string{"favoriteSong": "example"}
	case kindObject:
		return exampleObject(f.fields)
	case kindEnum:
		return f.enum[0]
	}
	panic(fmt.Sprintf("no example for field %s of kind %d", f.name, f.kind))
}
