package sources

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestNoticeSchemaEnumsAreTheModels: the enums of the notices' data (model.NoticeData's data tags)
// are the model's own lists, so a new status, kind or actor cannot go unseen by the schema.
func TestNoticeSchemaEnumsAreTheModels(t *testing.T) {
	var statuses []string
	for _, v := range []model.Variant{model.VariantA, model.VariantB} {
		statuses = append(statuses, v.Spec().Statuses...)
	}
	want := map[string][]string{
		"variant": {string(model.VariantA), string(model.VariantB)},
		"status":  statuses,
		"channel": {model.KindNoticeWebhook, model.KindNoticeChat, model.KindNoticeEmail},
		"by":      {model.ActorRule, model.ActorAPI, model.ActorPortal},
	}
	for _, f := range shapeOf[model.NoticeData]() {
		if w, ok := want[f.name]; ok {
			if f.kind != kindEnum || !slices.Equal(f.enum, w) {
				t.Errorf("%s: enum %v, want %v", f.name, f.enum, w)
			}
			delete(want, f.name)
		}
	}
	for name := range want {
		t.Errorf("model.NoticeData has no field %s", name)
	}
	for _, typ := range NoticeTypesDocumented() {
		s, err := NoticeSchema(typ)
		if err != nil {
			t.Fatal(err)
		}
		data := s["properties"].(map[string]any)["data"].(map[string]any)
		for _, name := range data["required"].([]string) {
			if data["properties"].(map[string]any)[name] == nil {
				t.Errorf("%s: %s is required but not a field", typ, name)
			}
		}
	}
	if _, err := NoticeSchema("webhook.unknown"); err == nil {
		t.Error("a schema for an unknown notice type")
	}
}
