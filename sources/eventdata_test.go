package sources_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/sources"
)

// TestValidateEventDataRefuses: unsafe integers, integers where a count is due, U+0000 in any
// string, and dates outside 0001-9999 are refused naming the field.
func TestValidateEventDataRefuses(t *testing.T) {
	const lead = `{"websiteId":%s,"brandId":2,"collectDataId":"c","email":"a@example.com","phone":"+4915112345678","name":%s,` +
		`"customFields":%s,"source":{"referrer":"https://x.example.com/","userAgent":"UA","ipAddress":"198.51.100.7","country":"DE"}}`
	const threshold = `{"websiteId":1,"brandId":2,"metric":"pageViews","value":%s,"threshold":100,"thresholdType":"reached"}`
	const campaign = `{"id":1,"name":"C","platform":"meta","status":"active","startDate":%q,"endDate":"2026-02-01T00:00:00.000Z","budget":10}`
	for _, tc := range []struct {
		name, eventType, data, field string
	}{
		{"id 2^53+1", "lead.captured", fmt.Sprintf(lead, "9007199254740993", `"N"`, `{}`), "data.websiteId"},
		{"id 2^63-1", "lead.captured", fmt.Sprintf(lead, "9223372036854775807", `"N"`, `{}`), "data.websiteId"},
		{"id 2^53 as exponent", "lead.captured", fmt.Sprintf(lead, "9.007199254740992e15", `"N"`, `{}`), "data.websiteId"},
		{"id fraction", "lead.captured", fmt.Sprintf(lead, "1.00000000000000001", `"N"`, `{}`), "data.websiteId"},
		{"NUL in name", "lead.captured", fmt.Sprintf(lead, "1", `"a\u0000b"`, `{}`), "data.name"},
		{"NUL in custom value", "lead.captured", fmt.Sprintf(lead, "1", `"N"`, `{"k":"\u0000"}`), "data.customFields.k"},
		{"NUL in custom key", "lead.captured", fmt.Sprintf(lead, "1", `"N"`, `{"\u0000":"v"}`), "data.customFields"},
		{"value not an integer", "analytics.threshold", fmt.Sprintf(threshold, "1.5"), "data.value"},
		{"value negative", "analytics.threshold", fmt.Sprintf(threshold, "-1"), "data.value"},
		{"value unsafe", "analytics.threshold", fmt.Sprintf(threshold, "9007199254740992"), "data.value"},
		{"year 0000", "campaign.created", fmt.Sprintf(campaign, "0000-01-01T00:00:00.000Z"), "data.startDate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sources.ValidateEventData(tc.eventType, []byte(tc.data))
			var de *input.DataError
			if !errors.As(err, &de) || de.Field != tc.field {
				t.Fatalf("ValidateEventData(%s) = %v, want a DataError on %s", tc.data, err, tc.field)
			}
		})
	}
	ok := fmt.Sprintf(lead, "9007199254740991", `"N"`, `{"k":"v"}`)
	if err := sources.ValidateEventData("lead.captured", []byte(ok)); err != nil {
		t.Fatalf("the largest safe id is refused: %v", err)
	}
	if err := sources.ValidateEventData("analytics.threshold", []byte(fmt.Sprintf(threshold, "1e3"))); err != nil {
		t.Fatalf("an integer count written with an exponent is refused: %v", err)
	}
}

// TestLeadNormalize: a form's phone becomes E.164, read in the fan's country when national, and
// the lead then passes lead.captured's own rule; what cannot be read names the phone.
func TestLeadNormalize(t *testing.T) {
	for _, tc := range []struct{ phone, country, want, field string }{
		{"0151 2345 6789", "de", "+4915123456789", ""},
		{"+1 415 555 0123", "", "+14155550123", ""},
		{"12", "DE", "", "phone"},
		{"0151 2345 6789", "", "", "phone"},
		{" ", "DE", "", "phone"},
	} {
		l := sources.Lead{CollectDataID: "c", Email: "fan@example.com", Phone: tc.phone,
			Source: sources.LeadSource{Referrer: "https://example.com/", IPAddress: "203.0.113.7", Country: tc.country}}
		err := l.Normalize()
		var de *input.DataError
		if tc.field != "" {
			if !errors.As(err, &de) || de.Field != tc.field {
				t.Errorf("Normalize(%q, %q) = %v, want a DataError on %s", tc.phone, tc.country, err, tc.field)
			}
			continue
		}
		if err != nil || l.Phone != tc.want || l.CustomFields == nil {
			t.Errorf("Normalize(%q, %q) = %v, phone %q, custom fields %v; want %q and {}", tc.phone, tc.country, err, l.Phone, l.CustomFields, tc.want)
			continue
		}
		data, _ := json.Marshal(sources.LeadCaptured{WebsiteID: 1, BrandID: 2, Lead: l})
		if err := sources.ValidateEventData("lead.captured", data); err != nil {
			t.Errorf("the normalized lead fails lead.captured's rules: %v\n%s", err, data)
		}
	}
}
