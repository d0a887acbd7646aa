package model_test

import (
	"fmt"
	"slices"
	"strings"
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

// TestPublishFilterOverrun (issue 40): a filter that runs out of its budget lets the event through
// and is named in the result, and an event judged before its transaction (JudgeFilters) is stored
// with the instant its judged bodies carried.
func TestPublishFilterOverrun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		_, account, err := model.CreateAPIKey(ctx, db, "overrun@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		mk := func(filter string) int64 {
			t.Helper()
			w := &model.Webhook{AccountID: account.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
				Status: model.StatusActive, Secret: "v1:x", CreatedAt: model.Now(), UpdatedAt: model.Now(), Filter: &filter}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
			return w.ID
		}
		tests := make([]string, 150)
		for i := range tests {
			tests[i] = fmt.Sprintf(`{"$in":"%sb%03d"}`, strings.Repeat("a", 12), i)
		}
		costly := mk(`{"data":{"notes":{"$or":[` + strings.Join(tests, ",") + `]}}}`)
		refusing := mk(`{"data":{"notes":{"$startsWith":"b"}}}`)
		data := `{"notes":"` + strings.Repeat("a", 250<<10) + `"}`

		for _, prejudged := range []bool{false, true} {
			ne := model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured", Data: data}
			if prejudged {
				if err := model.JudgeFilters(ctx, db, nil, &ne); err != nil {
					t.Fatal(err)
				}
				if ne.Verdicts == nil || ne.OccurredAt.IsZero() {
					t.Fatalf("JudgeFilters left verdicts %v, instant %v", ne.Verdicts, ne.OccurredAt)
				}
			}
			res, err := model.InsertEvent(ctx, db, ne)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Deliveries) != 1 || res.Deliveries[0].WebhookID != costly || !slices.Equal(res.Overran, []int64{costly}) {
				t.Errorf("prejudged %v: deliveries %+v, overran %v; want the costly filter's webhook, unjudged, and not %d", prejudged, res.Deliveries, res.Overran, refusing)
			}
			if res.Event.Matched != 1 || res.Event.Filtered != 1 {
				t.Errorf("prejudged %v: matched %d, filtered %d; want 1, 1", prejudged, res.Event.Matched, res.Event.Filtered)
			}
			if prejudged && !res.Event.OccurredAt.Equal(ne.OccurredAt) {
				t.Errorf("stored the event at %v; its judged bodies carried %v", res.Event.OccurredAt, ne.OccurredAt)
			}
		}
	})
}
