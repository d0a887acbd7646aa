package webhooks

import (
	"encoding/json"

	"github.com/webhookd/webhookd/model"
)

// OrderingEdit is a request's ordering setting (docs/ordering.md): Set false leaves the webhook's as
// it is; Set with JSON absent or null removes it, so its deliveries are no longer ordered; otherwise
// JSON is the setting as sent, {"key": "<dotted path into the delivered body>"}.
type OrderingEdit struct {
	Set  bool
	JSON json.RawMessage
}

// change checks the setting and turns it into the model's change. Every refusal is malformed (400):
// one naming ordering when the value is not an object, ordering.key otherwise.
func (e OrderingEdit) change() (model.OrderingChange, error) {
	if !e.Set {
		return model.OrderingChange{}, nil
	}
	if len(e.JSON) == 0 || string(e.JSON) == "null" {
		return model.OrderingChange{Set: true}, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(e.JSON, &members); err != nil {
		return model.OrderingChange{}, malformed("ordering", `ordering must be an object such as {"key": "data.id"}, or null`)
	}
	for name := range members {
		if name != "key" {
			return model.OrderingChange{}, malformed("ordering.key", "ordering takes one member, ordering.key; %s is not one", clip(name))
		}
	}
	raw, ok := members["key"]
	if !ok {
		return model.OrderingChange{}, malformed("ordering.key", "ordering.key is required")
	}
	var key *string
	if err := json.Unmarshal(raw, &key); err != nil || key == nil {
		return model.OrderingChange{}, malformed("ordering.key", `ordering.key must be a string, a dotted path into the delivered body such as "data.id"`)
	}
	if err := model.CheckOrderingKey(*key); err != nil {
		return model.OrderingChange{}, malformed("ordering.key", "ordering.key %s", err.Error())
	}
	return model.OrderingChange{Set: true, To: key}, nil
}
