package webhooks_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/proccpu"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// BenchmarkPublishFilters is the cost of one publish (Service.Publish, the intake's use case) on
// SQLite to an account whose webhooks carry payload filters (issue 40):
//   - hostile: 100 webhooks, each with a filter of its own of 4 KiB, 150 substring tests ($in with a
//     string) that fail against a 250 KiB event made of a long run of one letter;
//   - realistic: 1,000 webhooks, each with a filter of its own of about 650 bytes (countries,
//     an address's domain, a plan, a timestamp window, an $or of prefixes) and an ordinary lead;
//   - unfiltered: 3 webhooks without filters, what judging filters costs an account that has none.
//
// cpu-ms/op is the CPU time of the whole process per publish (proccpu.Self: on a shared machine it
// moves far less with the load than the clock), beside Go's wall-clock ns/op; filter-steps is the
// work its filters take, of filter.PublishBudget.
func BenchmarkPublishFilters(b *testing.B) {
	for _, c := range []struct {
		name     string
		webhooks int
		filter   func(i int) string
		data     string
	}{
		{"hostile", 100, hostileFilter, hostileData()},
		{"realistic", 1000, realisticFilter, realisticData},
		{"unfiltered", 3, func(int) string { return "" }, realisticData},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := dbtest.SQLite(b)
			s := webhookstest.New(b, db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), webhookstest.Config{MaxWebhooks: 10})
			scope := benchScope(b, db)
			for i := range c.webhooks {
				f := c.filter(i)
				now := model.Now()
				w := &model.Webhook{AccountID: scope.AccountID, Variant: scope.Variant, URL: "https://r.example.com/", EventType: "lead.captured",
					Status: model.StatusActive, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
				if f != "" {
					w.Filter = &f
				}
				if err := model.CreateWebhook(b.Context(), db, w, int64(c.webhooks)); err != nil {
					b.Fatal(err)
				}
			}
			ne := model.NewEvent{AccountID: scope.AccountID, Variant: scope.Variant, EventType: "lead.captured", Data: c.data}
			before := cpuTime(b)
			var matched int
			for b.Loop() {
				res, err := s.Publish(b.Context(), ne)
				if err != nil {
					b.Fatal(err)
				}
				matched = res.Event.Matched
			}
			b.ReportMetric(float64(cpuTime(b)-before)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(matched), "matched")
			// The steps its filters took, of filter.PublishBudget.
			probe := ne
			if err := model.JudgeFilters(b.Context(), db, sources.Versions(), &probe); err != nil {
				b.Fatal(err)
			}
			if probe.Verdicts != nil {
				b.ReportMetric(float64(probe.Verdicts.Spent()), "filter-steps")
			}
		})
	}
}

// cpuTime is the CPU time the process has used (proccpu.Self).
func cpuTime(b *testing.B) time.Duration {
	d, err := proccpu.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchScope is variant B of a new account, for a benchmark.
func benchScope(b *testing.B, db *model.DB) model.WebhookScope {
	b.Helper()
	_, account, err := model.CreateAPIKey(b.Context(), db, fmt.Sprintf("bench%d@example.com", accounts.Add(1)), "bench")
	if err != nil {
		b.Fatal(err)
	}
	return model.WebhookScope{AccountID: account.ID, Variant: model.VariantB}
}

// hostileData is a lead.captured of 250 KiB, nearly all of it one custom field that is a run of
// one letter: the text on which a substring test does the most work.
func hostileData() string {
	fields := map[string]string{"notes": strings.Repeat("a", 250<<10)}
	data, err := json.Marshal(map[string]any{"websiteId": 7, "brandId": 3, "email": "fan@example.com", "customFields": fields})
	if err != nil {
		panic(err) // a fixture that does not marshal is a defect of this file
	}
	return string(data)
}

// hostileFilter is webhook i's filter in the hostile case: 150 substring tests of 16 bytes, none of
// which the event's runs of "a" hold, so every one reads a whole run; 4,095 bytes, its own text
// per webhook (no two webhooks share a verdict).
func hostileFilter(i int) string {
	tests := make([]string, 150)
	for j := range tests {
		tests[j] = fmt.Sprintf(`{"$in":"%s%c%03d"}`, strings.Repeat("a", 12), 'b'+rune(j%20), i)
	}
	return fmt.Sprintf(`{"data":{"customFields":{"notes":{"$or":[%s]}}}}`, strings.Join(tests, ","))
}

// realisticData is an ordinary lead.captured.
const realisticData = `{"websiteId":7,"brandId":3,"collectDataId":"form-1","email":"fan@example.com","phone":"+4915112345678",` +
	`"name":"Alex Example","customFields":{"plan":"pro","newsletter":"yes","favouriteSong":"Everything In Its Right Place"},` +
	`"source":{"referrer":"https://www.example.org/landing?utm_source=newsletter","userAgent":"Mozilla/5.0 (X11; Linux x86_64)",` +
	`"ipAddress":"203.0.113.7","country":"DE"}}`

// realisticFilter is webhook i's filter in the realistic case, about 650 bytes: what an owner
// writes to route leads by market, plan and source. Half of them pass the lead.
func realisticFilter(i int) string {
	country := "DE"
	if i%2 == 1 {
		country = "US"
	}
	return fmt.Sprintf(`{"timestamp":{"$gte":"2026-01-01T00:00:00Z","$lt":"2099-01-01T00:00:00Z"},`+
		`"data":{"websiteId":{"$in":[7,%d,%d,%d]},"email":{"$endsWith":"@example.com"},`+
		`"source":{"country":{"$in":["%s","AT","CH","LU","LI","BE"]},"referrer":{"$startsWith":"https://"},"userAgent":{"$not":{"$in":"bot"}}},`+
		`"customFields":{"plan":{"$in":["pro","team","enterprise","business"]},"newsletter":{"$neq":"no"}},"phone":{"$exist":true}},`+
		`"$or":[{"data":{"name":{"$startsWith":"Al"}}},{"data":{"collectDataId":{"$in":["form-1","form-2","form-3"]}}},`+
		`{"data":{"source":{"ipAddress":{"$startsWith":"203.0.113."}}}}],`+
		`"$not":{"data":{"test":{"$exist":true}}},"x%04d":{"$exist":false}}`,
		100+i, 200+i, 300+i, country, i)
}
