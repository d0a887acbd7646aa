package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// MaxIdempotencyKey bounds an Idempotency-Key, as Stripe does.
const MaxIdempotencyKey = 255

// Intake is an event another system hands webhookd to deliver (the API's POST <prefix>/events):
// its type, its data as sent, and the Idempotency-Key that makes a repeat of it answer as the
// first did (empty: none).
type Intake struct {
	EventType      string
	Data           json.RawMessage
	IdempotencyKey string
}

// Accept applies the intake's rules to an event of the scope's account and variant, then
// publishes it to its subscribers (Publish). The rules: a type the variant's webhooks may subscribe
// to, named in the variant's type field (eventType or event); data present, JSON with no key
// repeated, valid data of the type (sources.ValidateEventData, which names the field at fault:
// data.<name>); an Idempotency-Key of at most MaxIdempotencyKey printable ASCII characters. The
// event is stored in canonical JSON; the same key with the same type and data answers with the
// first event (Replayed), with others ErrIdempotencyConflict.
func (s *Service) Accept(ctx context.Context, scope model.WebhookScope, in Intake) (*model.PublishResult, error) {
	typeField := scope.Variant.Spec().TypeField
	switch {
	case in.EventType == "":
		return nil, missing(typeField)
	case !scope.Variant.Registrable(in.EventType):
		return nil, invalid(typeField, "unknown %s %q; one of %v", typeField, in.EventType, scope.Variant.EventTypes())
	}
	if len(in.Data) == 0 || string(in.Data) == "null" {
		return nil, missing("data")
	}
	data, err := wire.CanonicalJSON(in.Data)
	// A number beyond float64's range (1e400) is a value out of its field's range, which the
	// validation below names, as it names 9007199254740993; it is not malformed JSON.
	beyondFloat := errors.Is(err, strconv.ErrRange)
	if errors.Is(err, wire.ErrDuplicateKey) {
		return nil, malformed("data", "data repeats an object key: %v", err)
	} else if err != nil && !beyondFloat {
		return nil, malformed("data", "data is not valid JSON")
	}
	// The data as sent, not its canonical form, whose float64 numbers have already rounded an
	// unsafe integer to another one.
	if err := sources.ValidateEventData(in.EventType, in.Data); err != nil {
		var de *input.DataError
		if errors.As(err, &de) {
			return nil, invalid(de.Field, "%s %s", de.Field, de.Reason)
		}
		return nil, err
	}
	if beyondFloat {
		return nil, invalid("data", "data holds a number beyond the range of a JSON number (about ±1.8e308)")
	}
	key := in.IdempotencyKey
	if len(key) > MaxIdempotencyKey || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return nil, malformed("Idempotency-Key", "Idempotency-Key must be at most %d printable ASCII characters", MaxIdempotencyKey)
	}
	return s.Publish(ctx, model.NewEvent{
		AccountID: scope.AccountID, Variant: scope.Variant, EventType: in.EventType, Data: string(data),
		IdempotencyKey: key, RequestHash: model.HashRequest(in.EventType, string(data)),
	})
}
