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
// event type's schema (docs/webhooks.yaml), and every notice body against its notice type's, when
// the receiver closes: the schemas are generated from the table intake validates with and from
// model.NoticeData, and this holds them to what the service really sends.

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

// noticeSchema is the schema of the body of a notice of noticeType (docs/webhooks.yaml, notice/...).
func noticeSchema(t *testing.T, noticeType string) *jsonschema.Schema {
	t.Helper()
	envelopeMu.Lock()
	defer envelopeMu.Unlock()
	key := "notice/" + noticeType
	if s, ok := envelopeSchemas[key]; ok {
		return s
	}
	s, err := sources.NoticeSchema(noticeType)
	if err != nil {
		t.Errorf("a notice of type %s, which has no schema: %v", noticeType, err)
		return nil
	}
	sch := schematest.Compile(t, s)
	envelopeSchemas[key] = sch
	return sch
}

// checkDeliveryBodies validates each request that is a webhook delivery (a JSON body with
// eventType or event) or a notice to an operational webhook (with type and timestamp) against its
// schema, and returns how many deliveries it checked. Chat messages and token requests are neither.
func checkDeliveryBodies(t *testing.T, reqs []receivedRequest) int {
	t.Helper()
	checked := 0
	for _, r := range reqs {
		var head struct {
			EventType *string `json:"eventType"`
			Event     *string `json:"event"`
			Type      *string `json:"type"`
			Timestamp *string `json:"timestamp"`
		}
		if json.Unmarshal(r.Body, &head) != nil {
			continue
		}
		if head.Type != nil && head.Timestamp != nil && head.EventType == nil && head.Event == nil {
			if sch := noticeSchema(t, *head.Type); sch != nil {
				if err := schematest.Validate(t, sch, r.Body); err != nil {
					t.Errorf("a notice to %s fails its schema: %v\n%s", r.Path, err, r.Body)
				}
			}
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
