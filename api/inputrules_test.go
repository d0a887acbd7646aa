package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestSafeIntegersDelivered (issue 8): the largest integer a JavaScript receiver reads exactly is
// accepted and stored exactly; one beyond it is refused at registration, never changed.
func TestSafeIntegersDelivered(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			auth := variants[1].auth(newKey(t, e.db))
			created := e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":9007199254740991,"slug":"max"}`)
			created.expect(t, 201, "")
			if !strings.Contains(string(created.raw), `"brandId":9007199254740991`) {
				t.Fatalf("created website = %s", created.raw)
			}
			one := "/v2/svc/v2/websites/" + jsonNumber(created.data(t)["id"])
			e.do(t, "POST", one+"/publish", auth, "").expect(t, 200, "")
			var ev model.Event
			if err := e.db.NewSelect().Model(&ev).Where("event_type = ?", "website.published").Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ev.Data, `"brandId":9007199254740991,`) {
				t.Fatalf("website.published data = %s", ev.Data)
			}
		})
	}
}

// TestIntakeInputRules (issue 8): at event intake, integers beyond ±(2^53-1), a count that is not
// an integer, U+0000 in any string and a date outside the years 0001-9999 are 422 naming the field,
// on both databases; nothing is stored.
func TestIntakeInputRules(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		type tc struct {
			name, eventType string
			data            map[string]any
			raw             string // replaces data when set, for literals Go would not write
			field           string
		}
		var cases []tc
		if v.name == "A" {
			cases = []tc{
				{"NUL in name", "campaign.created", mergeMap(validData["A"], "name", "a\x00b"), "", "data.name"},
				{"year 0000", "campaign.created", mergeMap(validData["A"], "startDate", "0000-01-01T00:00:00.000Z"), "", "data.startDate"},
				{"id 2^53+1", "campaign.updated", nil, strings.Replace(eventBody(v, "campaign.updated", validData["A"]), `"id":1`, `"id":9007199254740993`, 1), "data.id"},
			}
		} else {
			threshold := map[string]any{"websiteId": 1, "brandId": 2, "metric": "pageViews", "value": 150, "threshold": 100, "thresholdType": "reached"}
			presave := map[string]any{"websiteId": 1, "brandId": 2, "platform": "spotify", "fanEmail": nil, "releaseDate": "2026-12-01T00:00:00Z",
				"releaseUrl": "https://open.example.com/a", "boosts": map[string]any{"followedArtist": true, "savedCatalog": false, "emailCollected": false}}
			cases = []tc{
				{"websiteId 2^53+1", "lead.captured", nil, strings.Replace(eventBody(v, "lead.captured", validData["B"]), `"websiteId":1`, `"websiteId":9007199254740993`, 1), "data.websiteId"},
				{"brandId 2^63-1", "lead.captured", mergeMap(validData["B"], "brandId", int64(9223372036854775807)), "", "data.brandId"},
				{"NUL in userAgent", "lead.captured", mergeMap(validData["B"], "source", map[string]any{"referrer": "https://x.example.com/", "userAgent": "\x00", "ipAddress": "198.51.100.7", "country": "DE"}), "", "data.source.userAgent"},
				{"NUL in custom field", "lead.captured", mergeMap(validData["B"], "customFields", map[string]any{"k": "\x00"}), "", "data.customFields.k"},
				{"value not an integer", "analytics.threshold", mergeMap(threshold, "value", 150.5), "", "data.value"},
				{"threshold 2^53", "analytics.threshold", mergeMap(threshold, "threshold", int64(1<<53)), "", "data.threshold"},
				{"release year 0000", "presave.completed", mergeMap(presave, "releaseDate", "0000-06-01T00:00:00Z"), "", "data.releaseDate"},
			}
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				body := c.raw
				if body == "" {
					body = eventBody(v, c.eventType, c.data)
				}
				e.do(t, "POST", eventsPath(v), auth, body).expectError(t, v, 422, c.field)
			})
		}
		acc, _, err := model.Authenticate(context.Background(), e.db, key)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := e.db.NewSelect().Model((*model.Event)(nil)).Where("account_id = ?", acc.ID).Count(context.Background()); err != nil || n != 0 {
			t.Fatalf("refused events were stored: %d, %v", n, err)
		}
		// The largest safe id passes and is stored exactly.
		body := strings.Replace(eventBody(v, map[string]string{"A": "campaign.created", "B": "lead.captured"}[v.name], validData[v.name]),
			map[string]string{"A": `"id":1`, "B": `"websiteId":1`}[v.name], map[string]string{"A": `"id":9007199254740991`, "B": `"websiteId":9007199254740991`}[v.name], 1)
		r := e.do(t, "POST", eventsPath(v), auth, body)
		r.expect(t, 202, "")
		var ev model.Event
		if err := e.db.NewSelect().Model(&ev).Where("id = ?", r.data(t)["id"]).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(ev.Data, ":9007199254740991") {
			t.Fatalf("stored data = %s", ev.Data)
		}
	})
}

// TestFanIntakeInputRules (issue 8): lead and pre-save fields refuse U+0000 and dates outside the
// years 0001-9999, naming the field, on both databases.
func TestFanIntakeInputRules(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			v := variants[1]
			auth := v.auth(newKey(t, e.db))
			site := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"s"}`).data(t)["id"])
			e.do(t, "POST", site+"/publish", auth, "").expect(t, 200, "")
			lead := func(name, collect, custom string) string {
				return `{"collectDataId":"` + collect + `","email":"a@example.com","phone":"+4915123456789","name":"` + name +
					`","customFields":` + custom + `,"source":{"referrer":"https://x.example.com","userAgent":"","ipAddress":"203.0.113.9","country":"DE"}}`
			}
			presave := func(platform, date string) string {
				return `{"platform":"` + platform + `","fanEmail":null,"releaseDate":"` + date + `","releaseUrl":"https://open.example.com/a","boosts":{}}`
			}
			for _, tc := range []struct {
				name, path, body, field string
			}{
				{"NUL in name", "/leads", lead(`a\u0000`, "c", `{}`), "name"},
				{"NUL in collectDataId", "/leads", lead("n", `\u0000`, `{}`), "collectDataId"},
				{"NUL in custom field", "/leads", lead("n", "c", `{"k":"\u0000"}`), "customFields.k"},
				{"NUL in platform", "/presaves", presave(`spot\u0000ify`, "2026-12-01T00:00:00Z"), "platform"},
				{"release year 0000", "/presaves", presave("spotify", "0000-12-01T00:00:00Z"), "releaseDate"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e.do(t, "POST", site+tc.path, auth, tc.body).expectError(t, v, 422, tc.field)
				})
			}
		})
	}
}

// TestWebhookURLWithNUL: a URL is checked before it is stored; U+0000 in it is 422 on both databases.
func TestWebhookURLWithNUL(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/\x00", v.eventType)).expectError(t, v, 422, "url")
	})
}
