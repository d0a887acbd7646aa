package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/sources"
)

// fuzzRoute is one endpoint that decodes a request body; {campaign}, {site}, {webhookA} and
// {webhookB} stand for the ids of the fuzz account's campaign, published website and webhooks.
type fuzzRoute struct {
	method, path string
	variant      int // index into variants
	seed         string
}

var fuzzRoutes = []fuzzRoute{
	{"POST", "/api/svc/v2/campaigns", 0, campaignBody},
	{"PATCH", "/api/svc/v2/campaigns/{campaign}", 0, `{"name":"n","budget":2,"endDate":"2027-01-01T00:00:00Z","paused":false}`},
	{"POST", "/v2/svc/v2/websites", 1, `{"brandId":3,"slug":"fuzz"}`},
	{"POST", "/v2/svc/v2/websites/{site}/leads", 1, leadBody},
	{"POST", "/v2/svc/v2/websites/{site}/presaves", 1, `{"platform":"spotify","fanEmail":"f@example.com","releaseDate":"2026-12-01T00:00:00Z","releaseUrl":"https://open.example.com/a","boosts":{"followedArtist":true,"savedCatalog":false,"emailCollected":true}}`},
	{"POST", "/v2/svc/v2/websites/{site}/analytics", 1, `{"metric":"pageViews","increment":1}`},
	{"POST", "/api/svc/v2/events", 0, `{"eventType":"campaign.created","data":{"id":1,"name":"C","platform":"meta","status":"active","startDate":"2026-01-01T00:00:00.000Z","endDate":"2026-02-01T00:00:00.000Z","budget":10}}`},
	{"POST", "/v2/svc/v2/events", 1, `{"event":"analytics.threshold","data":{"websiteId":1,"brandId":2,"metric":"signups","value":10,"threshold":10,"thresholdType":"reached"}}`},
	{"POST", "/api/svc/v2/webhooks", 0, `{"url":"https://r.example.com/hook","eventType":"campaign.created"}`},
	{"POST", "/v2/svc/v2/webhooks", 1, `{"url":"https://r.example.com/hook","eventType":"lead.captured"}`},
	{"PATCH", "/api/svc/v2/webhooks/{webhookA}", 0, `{"rateLimit":10,"maxInFlight":2}`},
	{"PATCH", "/v2/svc/v2/webhooks/{webhookB}", 1, `{"rateLimit":null,"maxInFlight":1000}`},
	{"PUT", "/v2/svc/v2/webhooks/{webhookB}", 1, `{"url":"https://r.example.com/moved","rateLimit":1}`},
	{"POST", "/api/svc/v2/webhooks/{webhookA}/secret/rotate", 0, `{"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/5pBqdvU1dc="}`},
}

// FuzzRequestBodies (issue 8): whatever the body, the request decoders and handlers answer 2xx or
// 4xx on both databases, never 5xx: bad input is the client's to fix and must say so. Every answer
// is also checked against docs/openapi.yaml. The seeds (one valid body per endpoint and the inputs of
// issue 8) run in every go test.
func FuzzRequestBodies(f *testing.F) {
	for i, r := range fuzzRoutes {
		f.Add(uint8(i), r.seed)
		f.Add(uint8(i), "")
		f.Add(uint8(i), `{}`)
	}
	for _, s := range []struct {
		route int
		body  string
	}{
		{0, `{"name":"a\u0000b","platform":"meta","budget":1,"startDate":"2026-01-01T00:00:00Z","endDate":"2026-02-01T00:00:00Z"}`},
		{0, `{"name":"x","platform":"meta","budget":1,"startDate":"0000-01-01T00:00:00Z","endDate":"0000-02-01T00:00:00Z"}`},
		{0, `{"name":"x","platform":"meta","budget":1e308,"startDate":"0001-01-01T00:00:00+01:00","endDate":"9999-12-31T23:59:59-23:59"}`},
		{1, `{"name":"\u0000"}`},
		{1, `{"endDate":"0000-12-31T23:59:59.999Z"}`},
		{2, `{"brandId":9223372036854775807,"slug":"big"}`},
		{2, `{"brandId":1e400,"slug":"big"}`},
		{3, `{"collectDataId":"\u0000","email":"a@example.com","phone":"+4915123456789","name":"\u0000","customFields":{"\u0000":"\u0000"},"source":{"referrer":"https://x.example.com","userAgent":"\u0000","ipAddress":"203.0.113.9","country":"\u0000"}}`},
		{4, `{"platform":"spotify","fanEmail":null,"releaseDate":"0000-01-01T00:00:00Z","releaseUrl":"https://open.example.com/a","boosts":{}}`},
		{5, `{"metric":"pageViews","increment":9223372036854775808}`},
		{6, `{"eventType":"campaign.created","data":{"id":9007199254740993,"name":"\u0000","platform":"meta","status":"active","startDate":"0000-01-01T00:00:00.000Z","endDate":"2026-02-01T00:00:00.000Z","budget":10}}`},
		{7, `{"event":"lead.captured","data":{"websiteId":9007199254740993,"brandId":2,"collectDataId":"c","email":"a@example.com","phone":"+4915112345678","name":"N","customFields":{},"source":{"referrer":"https://x.example.com/","userAgent":"UA","ipAddress":"198.51.100.7","country":"DE"}}}`},
		{7, `{"event":"analytics.threshold","data":{"websiteId":1,"brandId":2,"metric":"signups","value":1e400,"threshold":-0,"thresholdType":"\ud800"}}`},
		{8, `{"url":"https://r.example.com/\u0000","eventType":"campaign.created"}`},
		{9, `{"url":"https://r.example.com/%00","eventType":"lead.captured"}`},
		{10, `{"rateLimit":1e400}`},
		{10, `{"rateLimit":-0,"maxInFlight":1.0}`},
		{11, `{"maxInFlight":9223372036854775808}`},
		{11, `{"url":{"rateLimit":1}}`},
		{12, `{"url":"https://r.example.com/","rateLimit":"\u0000"}`},
		{13, `{"secret":"whsec_AAAA"}`},
		{13, `{"secret":"whsec_\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000"}`},
		{13, `{"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/5pBqdvU1dc=","secret":null}`},
		{13, `{"SECRET":null}`},
	} {
		f.Add(uint8(s.route), s.body)
	}

	type target struct {
		name                               string
		e                                  *testEnv
		auth                               [2]func(*http.Request)
		campaign, site, webhookA, webhookB string
	}
	var targets []target
	for _, b := range dbtest.Backends() {
		db := b.Open(f)
		e := newEnv(f, db, func(c *envConfig) { c.RateLimit, c.RateBurst = 1e9, 1<<30 })
		key := newKey(f, db)
		ctx := context.Background()
		acc, _, err := model.Authenticate(ctx, db, key)
		if err != nil {
			f.Fatal(err)
		}
		now := model.Now()
		camp := &sources.Campaign{AccountID: acc.ID, Name: "fuzz", Platform: "meta", Status: sources.CampaignActive, Budget: 1,
			StartDate: now, EndDate: now.Add(24 * time.Hour), CreatedAt: now, UpdatedAt: now}
		if err := sources.InsertCampaign(ctx, db, camp); err != nil {
			f.Fatal(err)
		}
		site := &sources.Website{AccountID: acc.ID, BrandID: 1, Slug: "fuzz", Status: sources.WebsitePublished, PublishedAt: &now, CreatedAt: now, UpdatedAt: now}
		if err := sources.InsertWebsite(ctx, db, site); err != nil {
			f.Fatal(err)
		}
		var hooks [2]string
		for i, v := range []struct {
			variant   model.Variant
			eventType string
		}{{model.VariantA, "campaign.created"}, {model.VariantB, "lead.captured"}} {
			w := &model.Webhook{AccountID: acc.ID, Variant: v.variant, URL: "https://r.example.com/fuzz", EventType: v.eventType,
				Status: v.variant.InitialStatus(), Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				f.Fatal(err)
			}
			hooks[i] = strconv.FormatInt(w.ID, 10)
		}
		targets = append(targets, target{name: b.Name, e: e, auth: [2]func(*http.Request){variants[0].auth(key), variants[1].auth(key)},
			campaign: strconv.FormatInt(camp.ID, 10), site: strconv.FormatInt(site.ID, 10), webhookA: hooks[0], webhookB: hooks[1]})
	}

	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		for _, tg := range targets {
			path := strings.NewReplacer("{campaign}", tg.campaign, "{site}", tg.site, "{webhookA}", tg.webhookA, "{webhookB}", tg.webhookB).Replace(r.path)
			res := tg.e.do(t, r.method, path, tg.auth[r.variant], body)
			if res.status >= 500 || res.status < 200 {
				t.Fatalf("%s: %s %s with body %q answered %d: %s", tg.name, r.method, path, body, res.status, res.raw)
			}
		}
	})
}
