package docs_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// dateCase is a value of a date field and who accepts it. Intake is the truth: accepted says what
// it answers. onlyIntake marks the dates a pattern cannot refuse (the 29th of February of a year
// that is not a leap year): intake refuses them, and so does the JSON Schema where the validator
// asserts formats (format: date-time); docs/openapi.yaml, and the JSON Schema where formats are
// annotations (JSON Schema 2020-12's default), let them through by their pattern.
type dateCase struct {
	value      string
	accepted   bool
	onlyIntake bool
}

// campaignDates are values of a campaign's startDate and endDate (CampaignData): ISO 8601 UTC
// with milliseconds, years 0001 to 9999.
var campaignDates = []dateCase{
	{value: "2026-05-01T12:00:00.000Z", accepted: true},
	{value: "2026-01-01T00:00:00.000Z", accepted: true},
	{value: "2026-12-31T23:59:59.999Z", accepted: true},
	{value: "2026-04-30T10:00:00.000Z", accepted: true},
	{value: "2028-02-29T10:00:00.000Z", accepted: true},
	{value: "2000-02-29T10:00:00.000Z", accepted: true},
	{value: "0001-01-01T00:00:00.000Z", accepted: true},
	{value: "9999-12-31T23:59:59.999Z", accepted: true},
	{value: "2026-13-01T00:00:00.000Z"},
	{value: "2026-00-10T00:00:00.000Z"},
	{value: "2026-12-32T00:00:00.000Z"},
	{value: "2026-12-00T00:00:00.000Z"},
	{value: "2026-04-31T00:00:00.000Z"},
	{value: "2026-06-31T00:00:00.000Z"},
	{value: "2026-02-30T00:00:00.000Z"},
	{value: "2026-02-31T00:00:00.000Z"},
	{value: "2026-02-29T00:00:00.000Z", onlyIntake: true},
	{value: "2100-02-29T00:00:00.000Z", onlyIntake: true},
	{value: "2026-05-01T24:00:00.000Z"},
	{value: "2026-05-01T23:60:00.000Z"},
	{value: "2026-05-01T23:59:60.000Z"},
	{value: "2026-12-31T23:59:60.000Z"},
	{value: "0000-01-01T00:00:00.000Z"},
	{value: "2026-05-01T12:00:00Z"},
	{value: "2026-05-01T12:00:00.000+00:00"},
	{value: "2026-5-01T12:00:00.000Z"},
	{value: "2026-05-01t12:00:00.000z"},
}

// TestCampaignDatesAgree (issue 41): docs/openapi.yaml's CampaignData, intake and the JSON Schema of
// campaign.created accept the same campaign dates: each case runs through all three. Intake
// refuses month 13; the document's pattern did not.
func TestCampaignDatesAgree(t *testing.T) {
	checkDates(t, model.VariantA, "campaign.created", "CampaignData", "startDate", campaignDates)
}

// times are values of a field of kind time (website.published's publishedAt): RFC 3339 as Go's
// time.Parse reads it, any offset, years 0001 to 9999 in UTC. The document's pattern is the same
// as the campaign dates' but for the fraction and the offset.
var times = []dateCase{
	{value: "2026-05-01T12:00:00Z", accepted: true},
	{value: "2026-05-01T12:00:00.5Z", accepted: true},
	{value: "2026-05-01T12:00:00.123456789+02:00", accepted: true},
	{value: "2026-12-31T23:59:59-23:59", accepted: true},
	{value: "2028-02-29T00:00:00Z", accepted: true},
	{value: "2026-13-01T00:00:00Z"},
	{value: "2026-00-01T00:00:00Z"},
	{value: "2026-01-32T00:00:00Z"},
	{value: "2026-11-31T00:00:00Z"},
	{value: "2026-02-30T00:00:00Z"},
	{value: "2026-02-29T00:00:00Z", onlyIntake: true},
	{value: "2026-05-01T25:00:00Z"},
	{value: "2026-05-01T12:60:00Z"},
	{value: "2026-05-01T12:00:60Z"},
	{value: "2026-05-01T12:00:00+24:00"},
	{value: "2026-05-01T12:00:00+02:60"},
	{value: "2026-05-01 12:00:00Z"},
	{value: "2026-05-01"},
	{value: "2026-05-01t12:00:00z"},
	{value: "2026-05-01T12:00:00.1234567891Z", accepted: true},
}

// TestTimesAgree: the same for the other timestamps of event data.
func TestTimesAgree(t *testing.T) {
	checkDates(t, model.VariantB, "website.published", "WebsitePublishedData", "publishedAt", times)
}

// checkDates sets field of eventType's example data (the catalog's) to each case and asks intake,
// the component of docs/openapi.yaml that holds the type's data, and the type's JSON Schema, with
// and without format assertion.
func checkDates(t *testing.T, v model.Variant, eventType, component, field string, cases []dateCase) {
	t.Helper()
	doc := load(t)
	openAPI := doc.Components.Schemas[component]
	if openAPI == nil {
		t.Fatalf("docs/openapi.yaml has no %s", component)
	}
	schema, ok := sources.DataSchema(eventType, sources.LatestVersion(eventType), sources.JSONSchema)
	if !ok {
		t.Fatalf("no JSON Schema for %s", eventType)
	}
	asserting := schematest.Compile(t, schema)
	annotating := compileAnnotating(t, schema)
	var example json.RawMessage
	for _, info := range sources.EventCatalog(v) {
		if info.Type == eventType {
			example = info.Example
		}
	}
	for _, c := range cases {
		var data map[string]any
		if err := json.Unmarshal(example, &data); err != nil {
			t.Fatal(err)
		}
		data[field] = c.value
		raw, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		var decoded any
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		patterns := c.accepted || c.onlyIntake
		for _, v := range []struct {
			who  string
			err  error
			want bool
		}{
			{"intake", sources.ValidateEventData(eventType, raw), c.accepted},
			{"the JSON Schema, formats asserted", asserting.Validate(schematest.Instance(t, raw)), c.accepted},
			{"docs/openapi.yaml (" + component + ")", openAPI.Value.VisitJSON(decoded), patterns},
			{"the JSON Schema, formats annotations", annotating.Validate(schematest.Instance(t, raw)), patterns},
		} {
			if (v.err == nil) != v.want {
				t.Errorf("%s %q: %s says %v, want accepted=%v", field, c.value, v.who, errText(v.err), v.want)
			}
		}
	}
}

// compileAnnotating compiles schema as a validator that leaves formats to the application does (JSON
// Schema 2020-12's default): only the pattern judges a date.
func compileAnnotating(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://schema.json", schematest.Instance(t, raw)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func errText(err error) string {
	if err == nil {
		return "valid"
	}
	s := err.Error()
	if i := bytes.IndexByte([]byte(s), '\n'); i > 0 {
		s = s[:i]
	}
	return s
}

// TestCampaignDateInputIsIntakesPattern: the campaign creation's and PATCH's dates
// (CampaignDateInput, written by hand in docs/openapi.yaml) state the pattern intake checks every
// timestamp with (sources.ParseTime), the one generated into the event data's time fields; the
// api test TestCampaignBodyDatesAgree runs the dates through the handlers.
func TestCampaignDateInputIsIntakesPattern(t *testing.T) {
	doc := load(t)
	input := doc.Components.Schemas["CampaignDateInput"]
	generated := doc.Components.Schemas["WebsitePublishedData"].Value.Properties["publishedAt"]
	if input == nil || generated == nil {
		t.Fatal("docs/openapi.yaml has no CampaignDateInput, or WebsitePublishedData no publishedAt")
	}
	if input.Value.Pattern != generated.Value.Pattern {
		t.Fatalf("CampaignDateInput's pattern is not intake's:\n  %s\nwant\n  %s", input.Value.Pattern, generated.Value.Pattern)
	}
}
