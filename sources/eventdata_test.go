package sources_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/webhookd/webhookd/model"
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
			var de *model.DataError
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
