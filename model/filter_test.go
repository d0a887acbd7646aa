package model_test

import (
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestPublishFilters (issue 29): an event a webhook's filter refuses gets no delivery to it and
// counts as filtered; a filter matches the body as the receiver gets it (the type and timestamp
// too, not just data); the test event is not filtered; a stored filter that no longer compiles
// lets the event through rather than lose it.
func TestPublishFilters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		_, account, err := model.CreateAPIKey(ctx, db, "filters@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		acc := account.ID
		mk := func(filter *string) *model.Webhook {
			t.Helper()
			w := &model.Webhook{AccountID: acc, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
				Status: model.StatusActive, Secret: "v1:x", CreatedAt: model.Now(), UpdatedAt: model.Now(), Filter: filter}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
			return w
		}
		text := func(s string) *string { return &s }
		plain := mk(nil)
		de := mk(text(`{"data":{"country":"DE"}}`))
		typed := mk(text(`{"event":"lead.captured","timestamp":{"$startsWith":"20"}}`))
		broken := mk(text(`{"$nope":1}`))

		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc, Variant: model.VariantB, EventType: "lead.captured", Data: `{"country":"FR"}`})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		for _, d := range res.Deliveries {
			got[d.WebhookID] = true
		}
		if !got[plain.ID] || got[de.ID] || !got[typed.ID] || !got[broken.ID] || len(got) != 3 {
			t.Fatalf("deliveries to %v; want the plain, typed and broken webhooks, not the DE one", got)
		}
		if res.Event.Matched != 3 || res.Event.Filtered != 1 {
			t.Fatalf("matched %d, filtered %d; want 3, 1", res.Event.Matched, res.Event.Filtered)
		}
		if f := model.Filtered([]*model.PublishResult{res}); f[model.VariantB] != 1 {
			t.Fatalf("Filtered = %v", f)
		}
		ev, err := model.GetEvent(ctx, db, model.WebhookScope{AccountID: acc, Variant: model.VariantB}, res.Event.ID)
		if err != nil || ev.Filtered != 1 {
			t.Fatalf("stored event: %+v, %v", ev, err)
		}

		test, err := model.InsertEvent(ctx, db, model.WebhookTestEvent(de))
		if err != nil || len(test.Deliveries) != 1 || test.Event.Filtered != 0 {
			t.Fatalf("the test event to a filtered webhook: %+v, %v", test, err)
		}
	})
}
