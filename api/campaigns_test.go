package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

const campaignBody = `{"name":"Spring <launch>","platform":"meta","budget":1500.5,"startDate":"2026-03-01T00:00:00Z","endDate":"2026-03-31T23:59:59.999Z"}`

func campaignEvents(t *testing.T, e *testEnv, accountKey string) []model.Event {
	t.Helper()
	acc, _, err := model.Authenticate(context.Background(), e.db, accountKey)
	if err != nil {
		t.Fatal(err)
	}
	var evs []model.Event
	if err := e.db.NewSelect().Model(&evs).Where("account_id = ?", acc.ID).OrderExpr("id").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestCampaigns: creating emits campaign.created with CampaignData exactly; a PATCH emits
// campaign.updated only when budget, end date or pause state change; refused requests emit nothing.
func TestCampaigns(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			v := variants[0]
			key := newKey(t, e.db)
			auth := v.auth(key)
			created := e.do(t, "POST", "/api/svc/v2/campaigns", auth, campaignBody)
			created.expect(t, http.StatusCreated, "")
			c := created.data(t)
			if c["status"] != "active" || c["startDate"] != "2026-03-01T00:00:00.000Z" || c["budget"] != 1500.5 {
				t.Fatalf("created campaign = %v", c)
			}
			one := fmt.Sprintf("/api/svc/v2/campaigns/%s", jsonNumber(c["id"]))
			evs := campaignEvents(t, e, key)
			want := fmt.Sprintf(`{"id":%s,"name":"Spring <launch>","platform":"meta","status":"active","startDate":"2026-03-01T00:00:00.000Z","endDate":"2026-03-31T23:59:59.999Z","budget":1500.5}`, jsonNumber(c["id"]))
			if len(evs) != 1 || evs[0].EventType != "campaign.created" || evs[0].Data != want {
				t.Fatalf("events after create = %+v\nwant data %s", evs, want)
			}

			e.do(t, "PATCH", one, auth, `{"name":"Renamed"}`).expect(t, 200, "")
			e.do(t, "PATCH", one, auth, `{"budget":1500.5}`).expect(t, 200, "") // unchanged value
			if n := len(campaignEvents(t, e, key)); n != 1 {
				t.Fatalf("a name-only or no-op PATCH emitted: %d events", n)
			}
			for _, body := range []string{`{"budget":2000}`, `{"endDate":"2026-04-30T00:00:00.000Z"}`, `{"paused":true}`} {
				e.do(t, "PATCH", one, auth, body).expect(t, 200, "")
			}
			evs = campaignEvents(t, e, key)
			if len(evs) != 4 || evs[3].EventType != "campaign.updated" {
				t.Fatalf("events after three notable PATCHes = %d", len(evs))
			}
			wantLast := fmt.Sprintf(`{"id":%s,"name":"Renamed","platform":"meta","status":"paused","startDate":"2026-03-01T00:00:00.000Z","endDate":"2026-04-30T00:00:00.000Z","budget":2000}`, jsonNumber(c["id"]))
			if evs[3].Data != wantLast {
				t.Fatalf("last event data = %s, want %s", evs[3].Data, wantLast)
			}
			got := e.do(t, "GET", one, auth, "")
			got.expect(t, 200, "")
			if got.data(t)["status"] != "paused" || got.data(t)["name"] != "Renamed" {
				t.Fatalf("campaign = %v", got.data(t))
			}
			if n := len(e.do(t, "GET", "/api/svc/v2/campaigns", auth, "").list(t)); n != 1 {
				t.Fatalf("list = %d campaigns", n)
			}

			for _, tc := range []struct {
				name, method, path, body string
				status                   int
				field                    string
			}{
				{"missing name", "POST", "/api/svc/v2/campaigns", `{"platform":"meta","budget":1,"startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "name"},
				{"unknown platform", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"myspace","budget":1,"startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "platform"},
				{"negative budget", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":-1,"startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "budget"},
				{"budget wrong type", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":"ten","startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 400, "budget"},
				{"bad date", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":1,"startDate":"tomorrow","endDate":"2026-02-01T00:00:00Z"}`, 422, "startDate"},
				{"end before start", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":1,"startDate":"2026-03-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "endDate"},
				{"patch end before start", "PATCH", one, `{"endDate":"2020-01-01T00:00:00Z"}`, 422, "endDate"},
				{"patch unknown field", "PATCH", one, `{"platform":"google"}`, 400, "platform"},
				{"patch paused wrong type", "PATCH", one, `{"paused":"yes"}`, 400, "paused"},
				// Issue 8: PostgreSQL text cannot hold U+0000 nor its timestamps year 0; both databases refuse alike.
				{"NUL in name", "POST", "/api/svc/v2/campaigns", `{"name":"a\u0000b","platform":"meta","budget":1,"startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "name"},
				{"patch NUL in name", "PATCH", one, `{"name":"\u0000"}`, 422, "name"},
				{"year 0000 start", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":1,"startDate":"0000-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`, 422, "startDate"},
				{"year 0 by offset", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":1,"startDate":"0001-01-01T00:00:00+01:00","endDate":"2026-02-01T00:00:00Z"}`, 422, "startDate"},
				{"year 10000 by offset", "POST", "/api/svc/v2/campaigns", `{"name":"x","platform":"meta","budget":1,"startDate":"2026-01-01T00:00:00Z","endDate":"9999-12-31T23:59:59-01:00"}`, 422, "endDate"},
				{"patch year 0000 end", "PATCH", one, `{"endDate":"0000-01-01T00:00:00Z"}`, 422, "endDate"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e.do(t, tc.method, tc.path, auth, tc.body).expectError(t, v, tc.status, tc.field)
				})
			}
			if n := len(campaignEvents(t, e, key)); n != 4 {
				t.Fatalf("refused requests emitted events: %d, want 4", n)
			}
			// Another account's campaign is 404 and unchanged.
			intruder := v.auth(newKey(t, e.db))
			e.do(t, "GET", one, intruder, "").expect(t, 404, "not_found")
			e.do(t, "PATCH", one, intruder, `{"budget":1}`).expect(t, 404, "not_found")
			if got := e.do(t, "GET", one, auth, "").data(t)["budget"]; got != float64(2000) {
				t.Fatalf("budget after intruder PATCH = %v", got)
			}
		})
	}
}
