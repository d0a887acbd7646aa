package portal_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// BenchmarkPages measures the pages an owner opens most (the endpoints page, the event log's first
// page, and the same filtered by type), on an account with 10,000 events: ten endpoints with 1,000
// events each over the last 7 days, every event delivered to its endpoint in three attempts. It
// reports the p50 and p99 of one page's latency (in-process, from the request to
// the last byte of the page) beside ns/op:
//
//	go test -tags integration -run '^$' -bench Pages -benchtime 200x ./portal/ # both databases; without the tag, SQLite
func BenchmarkPages(b *testing.B) {
	for _, backend := range dbtest.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			db := backend.Open(b)
			ctx := context.Background()
			_, acc, err := model.CreateAPIKey(ctx, db, "bench-portal@example.com", "")
			if err != nil {
				b.Fatal(err)
			}
			now := model.Now()
			for i := range 10 {
				w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: fmt.Sprintf("https://r%d.example.com/hook", i),
					EventType: model.VariantB.EventTypes()[i%len(model.VariantB.EventTypes())], Status: model.StatusActive, Secret: "v1:x",
					CreatedAt: now, UpdatedAt: now}
				if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
					b.Fatal(err)
				}
				if err := dbtest.History(ctx, db, w, 1_000, 7*24*time.Hour, now); err != nil {
					b.Fatal(err)
				}
			}
			e := newEnv(b, db)
			token, _, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: acc.ID, Variant: model.VariantB, TTL: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			cookie := e.enter(b, token)
			for _, page := range benchPages {
				b.Run(page.name, func(b *testing.B) {
					var took []time.Duration
					for b.Loop() {
						req := httptest.NewRequest("GET", page.path, nil)
						req.AddCookie(cookie)
						rec := httptest.NewRecorder()
						t0 := time.Now()
						e.srv.ServeHTTP(rec, req)
						took = append(took, time.Since(t0))
						if rec.Code != http.StatusOK {
							b.Fatalf("GET %s: %d\n%s", page.path, rec.Code, rec.Body)
						}
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
					b.ReportMetric(float64(took[len(took)*99/100])/1e6, "p99-ms")
				})
			}
		})
	}
}

// benchPages are the pages BenchmarkPages opens.
var benchPages = []struct{ name, path string }{
	{"endpoints", "/portal/"},
	{"events", "/portal/events"},
	{"events-by-type", "/portal/events?type=" + model.VariantB.EventTypes()[1]},
}
