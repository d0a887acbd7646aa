package webhooks_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
)

const campaignData = `{"id":1,"name":"C","platform":"meta","status":"active","startDate":"2026-01-01T00:00:00.000Z","endDate":"2026-02-01T00:00:00.000Z","budget":10}`

// TestAcceptRefusals: each rule of the intake refuses with the field it names, malformed (the
// API's 400) where the value is not of the field's syntax, and stores nothing.
func TestAcceptRefusals(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	a, b := scopeOf(t, db, model.VariantA), scopeOf(t, db, model.VariantB)
	for _, tc := range []struct {
		name      string
		scope     model.WebhookScope
		in        webhooks.Intake
		field     string
		malformed bool
		missing   bool
	}{
		{"no type", a, webhooks.Intake{Data: json.RawMessage(campaignData)}, "eventType", false, true},
		{"no type, named as B names it", b, webhooks.Intake{Data: json.RawMessage(campaignData)}, "event", false, true},
		{"unknown type", a, webhooks.Intake{EventType: "campaign.exploded", Data: json.RawMessage(campaignData)}, "eventType", false, false},
		{"another variant's type", b, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(campaignData)}, "event", false, false},
		{"the test event", a, webhooks.Intake{EventType: model.EventTest, Data: json.RawMessage(`{"message":"x","webhookId":1}`)}, "eventType", false, false},
		{"no data", a, webhooks.Intake{EventType: "campaign.created"}, "data", false, true},
		{"null data", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(`null`)}, "data", false, true},
		{"not JSON", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(`{"id":`)}, "data", true, false},
		{"a key repeated", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(`{"x":1,"x":2}`)}, "data", true, false},
		{"a field of the wrong type", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(strings.Replace(campaignData, `"budget":10`, `"budget":"ten"`, 1))}, "data.budget", false, false},
		{"a field not of the type", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(strings.Replace(campaignData, `{`, `{"extra":1,`, 1))}, "data.extra", false, false},
		{"a key too long", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(campaignData), IdempotencyKey: strings.Repeat("k", webhooks.MaxIdempotencyKey+1)}, "Idempotency-Key", true, false},
		{"a key with a space", a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(campaignData), IdempotencyKey: "a key"}, "Idempotency-Key", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Accept(t.Context(), tc.scope, tc.in)
			var invalid *webhooks.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != tc.field || invalid.Malformed != tc.malformed || invalid.Missing != tc.missing {
				t.Fatalf("Accept = %#v (%v), want an InvalidError of %s, malformed %v, missing %v", err, err, tc.field, tc.malformed, tc.missing)
			}
			if !strings.HasPrefix(invalid.Error(), tc.field) && !strings.HasPrefix(invalid.Error(), "unknown "+tc.field) {
				t.Fatalf("the message %q does not name %s", invalid.Error(), tc.field)
			}
		})
	}
	if n, err := db.NewSelect().Model((*model.Event)(nil)).Count(t.Context()); err != nil || n != 0 {
		t.Fatalf("after refusals the database holds %d events (%v)", n, err)
	}
}

// TestAcceptStoresCanonicalDataOnce: the data is stored in canonical JSON; the same
// Idempotency-Key with the same type and data (in any spelling) answers with the first event,
// with other data ErrIdempotencyConflict; a key of MaxIdempotencyKey characters is taken.
func TestAcceptStoresCanonicalDataOnce(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	a := scopeOf(t, db, model.VariantA)
	key := strings.Repeat("k", webhooks.MaxIdempotencyKey)
	spaced := strings.ReplaceAll(campaignData, ",", ", ")
	first, err := s.Accept(t.Context(), a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(spaced), IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || first.Event.Data != campaignData {
		t.Fatalf("first accepted: replayed %v, data %s, want %s", first.Replayed, first.Event.Data, campaignData)
	}
	again, err := s.Accept(t.Context(), a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(campaignData), IdempotencyKey: key})
	if err != nil || !again.Replayed || again.Event.ID != first.Event.ID {
		t.Fatalf("the same request again: %+v, %v; want event %d replayed", again, err, first.Event.ID)
	}
	other := strings.Replace(campaignData, `"budget":10`, `"budget":11`, 1)
	if _, err := s.Accept(t.Context(), a, webhooks.Intake{EventType: "campaign.created", Data: json.RawMessage(other), IdempotencyKey: key}); !errors.Is(err, webhooks.ErrIdempotencyConflict) {
		t.Fatalf("the key with other data: %v, want ErrIdempotencyConflict", err)
	}
}
