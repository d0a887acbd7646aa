package model_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/uptrace/bun"
	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/docs"
	"github.com/webhookd/webhookd/internal/schematest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/wire"
)

// noticeSchemas are the body schemas of the notices in docs/webhooks.yaml, by notice type: the
// schema of the request body of its webhooks entry notice/<type>.
func noticeSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	var doc struct {
		Webhooks map[string]struct {
			Post struct {
				RequestBody struct {
					Content map[string]struct {
						Schema map[string]any `yaml:"schema"`
					} `yaml:"content"`
				} `yaml:"requestBody"`
			} `yaml:"post"`
		} `yaml:"webhooks"`
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(docs.Webhooks)).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Schema{}
	for _, typ := range append(model.NoticeTypes, model.NoticeTest) {
		hook, ok := doc.Webhooks["notice/"+typ]
		if !ok {
			t.Errorf("docs/webhooks.yaml describes no notice %s (webhooks: notice/%s)", typ, typ)
			continue
		}
		ref, _ := hook.Post.RequestBody.Content["application/json"].Schema["$ref"].(string)
		s := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		if s == nil {
			t.Errorf("notice/%s: no body schema at %q", typ, ref)
			continue
		}
		out[typ] = schematest.Compile(t, s)
	}
	return out
}

// TestNoticeBodiesMatchTheirSchemas (issue 41): the notices an operational webhook (a notification
// endpoint of kind webhook) receives pass their schemas in docs/webhooks.yaml. Every notice type
// is made by its real transition (an exhaustion, an attempt, the auto-disable rule, a person's
// disable and enable, a test) in both variants, and its body is wire.NoticeBody of the recorded
// notice, what the delivery activity sends.
func TestNoticeBodiesMatchTheirSchemas(t *testing.T) {
	schemas := noticeSchemas(t)
	if t.Failed() {
		t.FailNow()
	}
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		variantsOf(t, func(t *testing.T, v model.Variant, eventType string) {
			ctx := context.Background()
			_, acc, _ := model.CreateAPIKey(ctx, db, fmt.Sprintf("notice-bodies-%s@example.com", v), "")
			all := strings.Join(model.NoticeTypes, ",")
			ops := newChannel(t, db, acc.ID, v, model.KindNoticeWebhook, &all)
			w := newWebhook(t, db, acc.ID, v, eventType)
			rules := notices.Rules{Disable: notices.DisableRule{After: 10 * time.Hour, MinExhausted: 3}, WarnBefore: 4 * time.Hour,
				PublicURL: "https://hooks.example.com"}
			status := 503
			// exhaust marks delivery d of webhook hook exhausted as the activity does, naming its event.
			exhaust := func(hook *model.Webhook, d int64, at time.Time, lastError *model.NoticeError) model.ExhaustResult {
				t.Helper()
				var eventID int64
				if err := db.NewSelect().Table("deliveries").Column("event_id").Where("id = ?", d).Scan(ctx, &eventID); err != nil {
					t.Fatal(err)
				}
				res, err := model.MarkExhausted(ctx, db, model.Exhaustion{DeliveryID: d, WebhookID: hook.ID, EventID: eventID, LastAttemptAt: at, LastError: lastError}, rules)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}

			// webhook.failing and delivery.exhausted, with the last error; webhook.recovered.
			base := model.Now().Add(-time.Minute)
			d := failedDelivery(t, db, w, base)
			exhaust(w, d, base, &model.NoticeError{Class: "http_status", StatusCode: &status, Message: "receiver answered 503"})
			attemptWith(t, db, w, d, 2, true, base.Add(time.Second), rules)

			// On a second webhook: webhook.disabling, then webhook.disabled by the rule.
			w2 := newWebhook(t, db, acc.ID, v, eventType)
			since := model.Now().Add(-7 * time.Hour)
			for n := range 3 {
				at := since.Add(time.Duration(n) * time.Second)
				exhaust(w2, failedDelivery(t, db, w2, at), at, nil)
			}
			if _, err := db.NewUpdate().Model((*model.Webhook)(nil)).Set("failing_since = ?", model.Now().Add(-11*time.Hour)).Where("id = ?", w2.ID).Exec(ctx); err != nil {
				t.Fatal(err)
			}
			at := model.Now().Add(-time.Second)
			if res := exhaust(w2, failedDelivery(t, db, w2, at), at, nil); !res.Disabled {
				t.Fatalf("exhaustion past the rule = %+v; want disabled", res)
			}

			// webhook.enabled by the portal, webhook.disabled by the API.
			scope := model.WebhookScope{AccountID: acc.ID, Variant: v}
			if _, _, err := model.EnableWebhook(ctx, db, scope, w2.ID, model.ActorPortal, rules, model.Now()); err != nil {
				t.Fatal(err)
			}
			if _, _, err := model.DisableWebhook(ctx, db, scope, w2.ID, model.ActorAPI, rules, model.Now()); err != nil {
				t.Fatal(err)
			}

			var recorded []model.Event
			if err := db.NewSelect().Model(&recorded).Where("about_webhook_id IN (?)", bun.List([]int64{w.ID, w2.ID})).OrderExpr("id").Scan(ctx); err != nil {
				t.Fatal(err)
			}
			// notice.test, about the operational webhook itself.
			test, err := notices.TestNotice(ops)
			if err != nil {
				t.Fatal(err)
			}
			recorded = append(recorded, model.Event{EventType: test.EventType, Data: test.Data, OccurredAt: model.Now()})

			seen := map[string]int{}
			for _, ev := range recorded {
				seen[ev.EventType]++
				body := wire.NoticeBody(ev.EventType, []byte(ev.Data), ev.OccurredAt)
				sch := schemas[ev.EventType]
				if sch == nil {
					t.Errorf("a %s notice, which docs/webhooks.yaml does not describe:\n%s", ev.EventType, body)
					continue
				}
				if err := schematest.Validate(t, sch, body); err != nil {
					t.Errorf("a %s notice fails its schema in docs/webhooks.yaml: %v\n%s", ev.EventType, err, body)
				}
				for other, s := range schemas {
					if other != ev.EventType && s.Validate(schematest.Instance(t, body)) == nil {
						t.Errorf("a %s notice passes the schema of %s", ev.EventType, other)
					}
				}
			}
			for _, typ := range append(model.NoticeTypes, model.NoticeTest) {
				if seen[typ] == 0 {
					t.Errorf("no %s notice was made; seen %v", typ, seen)
				}
			}
		})
	})
}
