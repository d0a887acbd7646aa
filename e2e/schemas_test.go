//go:build e2e

package e2e

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// Every delivery body a test's receivers get is checked against its variant's envelope and its
// event type's schema (docs/webhooks.yaml), when the receiver closes: the schemas are generated
// from the table intake validates with, and this holds them to what the service really sends.

var (
	envelopeMu      sync.Mutex
	envelopeSchemas = map[string]*jsonschema.Schema{}
)

func envelopeSchema(t *testing.T, l wire.Layout, eventType string) *jsonschema.Schema {
	t.Helper()
	envelopeMu.Lock()
	defer envelopeMu.Unlock()
	key := string(l) + "/" + eventType
	if s, ok := envelopeSchemas[key]; ok {
		return s
	}
	s, err := sources.EnvelopeSchema(l, eventType, sources.JSONSchema)
	if err != nil {
		t.Errorf("a delivery of %s, which has no schema: %v", eventType, err)
		return nil
	}
	sch := schematest.Compile(t, s)
	envelopeSchemas[key] = sch
	return sch
}

// checkDeliveryBodies validates each request that is a webhook delivery (a JSON body with
// eventType or event; notices, chat messages and token requests are not) against its schema, and
// returns how many it checked.
func checkDeliveryBodies(t *testing.T, reqs []receivedRequest) int {
	t.Helper()
	checked := 0
	for _, r := range reqs {
		var head struct {
			EventType *string `json:"eventType"`
			Event     *string `json:"event"`
		}
		if json.Unmarshal(r.Body, &head) != nil {
			continue
		}
		var sch *jsonschema.Schema
		switch {
		case head.EventType != nil:
			sch = envelopeSchema(t, wire.LayoutA, *head.EventType)
		case head.Event != nil:
			sch = envelopeSchema(t, wire.LayoutB, *head.Event)
		default:
			continue
		}
		if sch == nil {
			continue
		}
		if err := schematest.Validate(t, sch, r.Body); err != nil {
			t.Errorf("a delivery to %s fails its schema: %v\n%s", r.Path, err, r.Body)
		}
		checked++
	}
	return checked
}
