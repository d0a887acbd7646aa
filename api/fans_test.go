package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

const leadBody = `{"collectDataId":"blk_1","email":"fan@example.com","phone":"0151 2345 6789","name":"Fan","customFields":{"city":"Köln"},
 "source":{"referrer":"https://t.co/x","userAgent":"UA","ipAddress":"203.0.113.9","country":"de"}}`

// TestFanIntake: leads normalize the phone to E.164 and validate the rest naming the field;
// pre-saves allow a null fan e-mail; only published websites take fans; analytics refuses signups.
func TestFanIntake(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			v := variants[1]
			key := newKey(t, e.db)
			auth := v.auth(key)
			site := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"s"}`).data(t)["id"])
			e.do(t, "POST", site+"/leads", auth, leadBody).expect(t, http.StatusConflict, "conflict") // still a draft
			e.do(t, "POST", site+"/publish", auth, "").expect(t, 200, "")

			r := e.do(t, "POST", site+"/leads", auth, leadBody)
			r.expect(t, http.StatusAccepted, "")
			var ev model.Event
			if err := e.db.NewSelect().Model(&ev).Where("id = ?", r.data(t)["id"]).Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if want := `"phone":"+4915123456789"`; ev.EventType != "lead.captured" || !strings.Contains(ev.Data, want) {
				t.Fatalf("lead event %s, want %s", ev.Data, want)
			}
			// One intake reply everywhere: the shape POST /events answers.
			if d := r.data(t); d["event"] != "lead.captured" || d["matched"] == nil || len(d) != 3 {
				t.Fatalf("lead reply data = %v, want {id, event, matched}", d)
			}
			e.do(t, "POST", site+"/presaves", auth, `{"platform":"spotify","fanEmail":null,"releaseDate":"2026-12-01T00:00:00Z","releaseUrl":"https://open.example.com/a","boosts":{"followedArtist":true,"savedCatalog":false,"emailCollected":false}}`).expect(t, http.StatusAccepted, "")

			for _, tc := range []struct {
				name, path, body string
				status           int
				field            string
			}{
				{"bad email", "/leads", `{"collectDataId":"c","email":"nope","phone":"+4915123456789","name":"","customFields":{},"source":{"referrer":"https://x.example.com","userAgent":"","ipAddress":"203.0.113.9","country":"DE"}}`, 422, "email"},
				{"bad phone", "/leads", `{"collectDataId":"c","email":"a@example.com","phone":"12","name":"","customFields":{},"source":{"referrer":"https://x.example.com","userAgent":"","ipAddress":"203.0.113.9","country":"DE"}}`, 422, "phone"},
				{"custom field not a string", "/leads", `{"collectDataId":"c","email":"a@example.com","phone":"+4915123456789","name":"","customFields":{"age":30},"source":{}}`, 400, "customFields"},
				{"bad referrer", "/leads", `{"collectDataId":"c","email":"a@example.com","phone":"+4915123456789","name":"","customFields":{},"source":{"referrer":"not a url","userAgent":"","ipAddress":"203.0.113.9","country":"DE"}}`, 422, "source.referrer"},
				{"presave bad date", "/presaves", `{"platform":"spotify","fanEmail":null,"releaseDate":"soon","releaseUrl":"https://open.example.com/a","boosts":{}}`, 422, "releaseDate"},
				{"signups not countable", "/analytics", `{"metric":"signups","increment":1}`, 422, "metric"},
				{"increment zero", "/analytics", `{"metric":"pageViews","increment":0}`, 422, "increment"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e.do(t, "POST", site+tc.path, auth, tc.body).expectError(t, v, tc.status, tc.field)
				})
			}
			counted := e.do(t, "POST", site+"/analytics", auth, `{"metric":"pageViews","increment":5}`)
			counted.expect(t, 200, "")
			if counted.data(t)["value"] != float64(5) {
				t.Fatalf("counter = %v", counted.data(t))
			}
			var signups int64
			if err := e.db.NewSelect().Table("analytics_counters").Column("value").Where("metric = 'signups'").Scan(context.Background(), &signups); err != nil || signups != 2 {
				t.Fatalf("signups = %d, %v; want 2 (one lead, one pre-save)", signups, err)
			}
			intruder := v.auth(newKey(t, e.db))
			e.do(t, "POST", site+"/leads", intruder, leadBody).expect(t, 404, "not_found")
			e.do(t, "POST", site+"/analytics", intruder, `{"metric":"pageViews","increment":1}`).expect(t, 404, "not_found")
		})
	}
}
