package sources

import (
	"fmt"
	"slices"

	"github.com/webhookd/webhookd/model"
)

// The notices an operational webhook (a notification endpoint of kind webhook) receives, in
// docs/webhooks.yaml beside the deliveries: {type, timestamp, data} (wire.NoticeBody), data being
// model.NoticeData, whose fields and rules are read from its tags as event data's are, so the
// schema follows the struct the notices are made from (docs/notifications.md).

// noticeDescriptions says when each notice is sent.
var noticeDescriptions = map[string]string{
	model.NoticeFailing:   "The webhook moved to its variant's failing status (A failed, B failing): a delivery ran out of retries, or a webhook.test failed. Once per failure; `suppressed` counts the failures the storm rule kept quiet before it.",
	model.NoticeRecovered: "The first successful attempt after a webhook.failing.",
	model.NoticeDisabling: "The auto-disable rule will disable the webhook at `disableAt` unless a delivery succeeds first. Once per failure.",
	model.NoticeDisabled:  "The webhook was disabled: by the auto-disable rule (`by: rule`) or by a person (`by: api` or `portal`).",
	model.NoticeEnabled:   "A disabled webhook was enabled again (`by: api` or `portal`).",
	model.NoticeExhausted: "One delivery ran out of retries: `deliveryId` and `eventId` name it. Sent only to the channels whose `types` list it.",
	model.NoticeTest:      "A test the owner asked for (POST <prefix>/notification-endpoints/<id>/test), about the channel itself: `webhookId` is the channel's id, `channel` its kind, `eventType` empty, `message` a sentence.",
}

// noticeRequires are the fields of model.NoticeData left out of other notices that a notice type
// always carries.
var noticeRequires = map[string][]string{
	model.NoticeDisabling: {"disableAt"},
	model.NoticeDisabled:  {"by"},
	model.NoticeEnabled:   {"by"},
	model.NoticeExhausted: {"deliveryId", "eventId"},
	model.NoticeTest:      {"channel", "message"},
}

// NoticeTypesDocumented are the notices docs/webhooks.yaml describes: every type a channel can
// subscribe to, and notice.test.
func NoticeTypesDocumented() []string {
	return append(slices.Clone(model.NoticeTypes), model.NoticeTest)
}

// NoticeSchema is the JSON Schema of the body an operational webhook receives for a notice of
// noticeType.
func NoticeSchema(noticeType string) (map[string]any, error) {
	desc, ok := noticeDescriptions[noticeType]
	if !ok {
		return nil, fmt.Errorf("no schema for notice type %q", noticeType)
	}
	data := objectSchema(shapeOf[model.NoticeData](), JSONSchema)
	data["required"] = append(data["required"].([]string), noticeRequires[noticeType]...)
	data["description"] = "What happened to which webhook (docs/notifications.md, \"What a notice carries\")."
	return map[string]any{
		"title":       noticeType + " notice",
		"description": desc,
		"type":        "object",
		"properties": map[string]any{
			"type":      map[string]any{"type": "string", "const": noticeType, "description": "The notice type."},
			"timestamp": map[string]any{"type": "string", "format": "date-time", "pattern": timeMillisSchemaPattern, "description": "When the notice was recorded: ISO 8601 UTC with milliseconds."},
			"data":      data,
		},
		"required":             []string{"type", "timestamp", "data"},
		"additionalProperties": false,
	}, nil
}
