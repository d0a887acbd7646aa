package model_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// hourCounts renders buckets as "delivered/retried/failed" per hour, for a readable comparison.
func hourCounts(buckets []model.HourBucket) []string {
	out := make([]string, len(buckets))
	for i, b := range buckets {
		out[i] = fmt.Sprintf("%d/%d/%d", b.Delivered, b.Retried, b.Failed)
	}
	return out
}

// TestEndpointHourly: each attempt of the webhook counts once, in the UTC hour it started: a success
// as delivered, the attempt that exhausted its delivery as failed, every other failed attempt as
// retried (but not the last of a canceled delivery); empty hours are there; other webhooks,
// attempts outside the window, other accounts and deleted webhooks are not.
func TestEndpointHourly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "chart@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "other-chart@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		sibling := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		// In the past: a delivery's updated_at (now) is never before its attempts.
		t0 := model.Now().Truncate(time.Hour).Add(-48 * time.Hour)
		h := func(hours int, minutes int) time.Time {
			return t0.Add(time.Duration(hours)*time.Hour + time.Duration(minutes)*time.Minute)
		}

		// Retried twice, then delivered.
		d1 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d1, 1, false, h(0, 5))
		attempt(t, db, w, d1, 2, false, h(1, 0))
		attempt(t, db, w, d1, 3, true, h(1, 59))
		// Retried once, then exhausted: failed in the hour of its last attempt.
		d2 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d2, 1, false, h(2, 10))
		attempt(t, db, w, d2, 2, false, h(3, 10))
		if _, err := exhaust(ctx, db, d2, w.ID, h(3, 10)); err != nil {
			t.Fatal(err)
		}
		// Still in its schedule after one failure: retried.
		d3 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d3, 1, false, h(2, 30))
		// Failed, then canceled: counted nowhere.
		d4 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d4, 1, false, h(4, 0))
		if err := model.CancelDelivery(ctx, db, d4); err != nil {
			t.Fatal(err)
		}
		// Outside the window [h(0), h(6)): before, and at its (exclusive) end.
		d5 := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d5, 1, true, h(-1, 59))
		attempt(t, db, w, d5, 2, true, h(6, 0))
		// Another webhook of the account, in the window.
		ds := deliveryFor(t, db, acc.ID, sibling)
		attempt(t, db, sibling, ds, 1, true, h(1, 0))

		want := []string{"0/1/0", "1/1/0", "0/2/0", "0/0/1", "0/0/0", "0/0/0"}
		// since is not on the hour and not in UTC: the window starts at its hour, in UTC.
		since := h(0, 30).In(time.FixedZone("UTC+5:30", 5*3600+1800))
		got, err := model.EndpointHourly(ctx, db, acc.ID, w.ID, since, h(6, 0))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(hourCounts(got)) != fmt.Sprint(want) {
			t.Fatalf("buckets = %v, want %v", hourCounts(got), want)
		}
		for i, b := range got {
			if !b.Hour.Equal(h(i, 0)) || b.Hour.Location() != time.UTC {
				t.Fatalf("bucket %d starts at %v, want %v in UTC", i, b.Hour, h(i, 0))
			}
		}

		// An until within an hour includes that hour, up to until.
		got, err = model.EndpointHourly(ctx, db, acc.ID, w.ID, h(5, 0), h(6, 1))
		if err != nil || fmt.Sprint(hourCounts(got)) != "[0/0/0 1/0/0]" {
			t.Fatalf("partial last hour = %v, %v", hourCounts(got), err)
		}

		// A manual retry that delivers the exhausted delivery: its old last attempt was retried.
		attempt(t, db, w, d2, 3, true, h(5, 0))
		got, err = model.EndpointHourly(ctx, db, acc.ID, w.ID, h(0, 0), h(6, 0))
		if err != nil {
			t.Fatal(err)
		}
		if want := "[0/1/0 1/1/0 0/2/0 0/1/0 0/0/0 1/0/0]"; fmt.Sprint(hourCounts(got)) != want {
			t.Fatalf("after the manual retry: buckets = %v, want %v", hourCounts(got), want)
		}

		if got, err := model.EndpointHourly(ctx, db, acc.ID, w.ID, h(6, 0), h(6, 0)); err != nil || len(got) != 0 {
			t.Fatalf("empty window = %v, %v", got, err)
		}
		var dataErr *input.DataError
		if _, err := model.EndpointHourly(ctx, db, acc.ID, w.ID, h(0, 0), h(model.MaxHourBuckets+1, 0)); !errors.As(err, &dataErr) || dataErr.Field != "since" {
			t.Fatalf("too long a window: err = %v", err)
		}
		if got, err := model.EndpointHourly(ctx, db, acc.ID, w.ID, h(0, 0), h(model.MaxHourBuckets, 0)); err != nil || len(got) != model.MaxHourBuckets {
			t.Fatalf("longest window: %d buckets, %v", len(got), err)
		}

		if _, err := model.EndpointHourly(ctx, db, other.ID, w.ID, h(0, 0), h(6, 0)); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("another account's webhook: err = %v, want ErrNotFound", err)
		}
		if _, err := model.EndpointHourly(ctx, db, acc.ID, w.ID+1000, h(0, 0), h(6, 0)); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("no such webhook: err = %v, want ErrNotFound", err)
		}
		if err := model.DeleteWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}, sibling.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := model.EndpointHourly(ctx, db, acc.ID, sibling.ID, h(0, 0), h(6, 0)); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("deleted webhook: err = %v, want ErrNotFound", err)
		}
	})
}

// BenchmarkEndpointHourly: the chart's query for a webhook with 10,000 deliveries of three attempts
// each over the last 7 days, beside another webhook as busy; a day's window and a week's.
func BenchmarkEndpointHourly(b *testing.B) {
	for _, backend := range dbtest.Backends() {
		b.Run(backend.Name, func(b *testing.B) {
			db := backend.Open(b)
			ctx := context.Background()
			_, acc, err := model.CreateAPIKey(ctx, db, "bench-chart@example.com", "")
			if err != nil {
				b.Fatal(err)
			}
			now := model.Now()
			var hooks []*model.Webhook
			for range 2 {
				w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
					Status: model.StatusActive, Secret: "v1:x", CreatedAt: now, UpdatedAt: now}
				if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
					b.Fatal(err)
				}
				hooks = append(hooks, w)
			}
			for _, w := range hooks {
				if err := dbtest.History(ctx, db, w, 10_000, 7*24*time.Hour, now); err != nil {
					b.Fatal(err)
				}
			}
			for _, window := range []time.Duration{24 * time.Hour, 7 * 24 * time.Hour} {
				b.Run(fmt.Sprintf("%dh", int(window.Hours())), func(b *testing.B) {
					for b.Loop() {
						buckets, err := model.EndpointHourly(ctx, db, acc.ID, hooks[0].ID, now.Add(-window), now)
						if err != nil {
							b.Fatal(err)
						}
						total := 0
						for _, bk := range buckets {
							total += bk.Total()
						}
						if total == 0 {
							b.Fatal("no attempts counted")
						}
					}
				})
			}
		})
	}
}

// TestEndpointLatency: nearest-rank percentiles over every attempt of the webhook in the window,
// whatever its outcome; nil without attempts; other webhooks and attempts outside the window do
// not count, and a window beyond MaxHourBuckets hours is refused as EndpointHourly refuses it.
func TestEndpointLatency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "latency@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		sibling := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		t0 := model.Now().Truncate(time.Hour).Add(-5 * time.Hour)
		record := func(w *model.Webhook, at time.Time, latency int64, ok bool) {
			t.Helper()
			o := model.AttemptOutcome{Success: ok}
			o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = deliveryFor(t, db, acc.ID, w), 1, w.URL, at, latency
			if !ok {
				class := "timeout"
				o.ErrorClass = &class
			}
			if _, err := model.RecordAttempt(ctx, db, w, o); err != nil {
				t.Fatal(err)
			}
		}
		if l, err := model.EndpointLatency(ctx, db, w.ID, t0, t0.Add(time.Hour)); err != nil || l != nil {
			t.Fatalf("no attempts: %v, %v", l, err)
		}
		// 1..20 ms, in no order, failures among them: p50 is the 10th, p95 the 19th.
		for i, ms := range []int64{7, 20, 3, 15, 1, 12, 19, 9, 5, 14, 2, 18, 11, 4, 16, 8, 13, 6, 17, 10} {
			record(w, t0.Add(time.Duration(i)*time.Minute), ms, i%3 != 0)
		}
		record(w, t0.Add(-time.Minute), 5000, true) // before the window
		record(w, t0.Add(time.Hour), 5000, true)    // at its exclusive end
		record(sibling, t0.Add(time.Minute), 900, true)
		l, err := model.EndpointLatency(ctx, db, w.ID, t0, t0.Add(time.Hour))
		if err != nil || l == nil || *l != (model.Latency{Attempts: 20, P50: 10, P95: 19}) {
			t.Fatalf("latency = %+v, %v; want 20 attempts, p50 10, p95 19", l, err)
		}
		// One attempt is every percentile.
		if l, err := model.EndpointLatency(ctx, db, sibling.ID, t0, t0.Add(time.Hour)); err != nil || *l != (model.Latency{Attempts: 1, P50: 900, P95: 900}) {
			t.Fatalf("one attempt: %+v, %v", l, err)
		}
		var dataErr *input.DataError
		if _, err := model.EndpointLatency(ctx, db, w.ID, t0, t0.Add((model.MaxHourBuckets+1)*time.Hour)); !errors.As(err, &dataErr) {
			t.Fatalf("too long a window: %v", err)
		}
	})
}

// TestLastFailedAttempt: the latest failed attempt of the webhook in the window, with its class,
// status code and text; nil when none failed there.
func TestLastFailedAttempt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "lasterror@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		t0 := model.Now().Truncate(time.Hour).Add(-5 * time.Hour)
		d := deliveryFor(t, db, acc.ID, w)
		attempt(t, db, w, d, 1, false, t0.Add(time.Minute))
		attempt(t, db, w, d, 2, false, t0.Add(2*time.Minute))
		attempt(t, db, w, d, 3, true, t0.Add(3*time.Minute))
		attempt(t, db, w, deliveryFor(t, db, acc.ID, w), 1, false, t0.Add(time.Hour)) // after the window
		f, err := model.LastFailedAttempt(ctx, db, w.ID, t0, t0.Add(time.Hour))
		if err != nil || f == nil || !f.StartedAt.Equal(t0.Add(2*time.Minute)) || f.ErrorClass != "http_status" || f.Error == nil || *f.Error != "receiver answered 500" {
			t.Fatalf("last failed attempt = %+v, %v", f, err)
		}
		if f, err := model.LastFailedAttempt(ctx, db, w.ID, t0.Add(3*time.Minute), t0.Add(time.Hour)); err != nil || f != nil {
			t.Fatalf("only a success in the window: %+v, %v", f, err)
		}
	})
}

// TestEndpointsHourly: the hours of many webhooks read in one query are each webhook's own, as
// EndpointHourly reads them one by one; another account's webhook and a deleted one are absent.
func TestEndpointsHourly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, _ := model.CreateAPIKey(ctx, db, "charts@example.com", "")
		_, other, _ := model.CreateAPIKey(ctx, db, "other-charts@example.com", "")
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		sibling := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		idle := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		gone := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		foreign := newWebhook(t, db, other.ID, model.VariantA, "campaign.created")
		t0 := model.Now().Truncate(time.Hour).Add(-3 * time.Hour)
		for i, hook := range []*model.Webhook{w, sibling, gone, foreign} {
			d := deliveryFor(t, db, hook.AccountID, hook)
			for n := range i + 1 {
				attempt(t, db, hook, d, n+1, n == i, t0.Add(time.Duration(n)*time.Hour))
			}
		}
		if err := model.DeleteWebhook(ctx, db, model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}, gone.ID); err != nil {
			t.Fatal(err)
		}
		until := model.Now()
		hours, err := model.EndpointsHourly(ctx, db, acc.ID, []int64{w.ID, sibling.ID, idle.ID, gone.ID, foreign.ID}, t0, until)
		if err != nil {
			t.Fatal(err)
		}
		if len(hours) != 3 {
			t.Fatalf("hours of %d webhooks, want w, sibling and idle: %v", len(hours), hours)
		}
		for _, hook := range []*model.Webhook{w, sibling, idle} {
			one, err := model.EndpointHourly(ctx, db, acc.ID, hook.ID, t0, until)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(hourCounts(hours[hook.ID])) != fmt.Sprint(hourCounts(one)) {
				t.Fatalf("webhook %d: %v together, %v alone", hook.ID, hourCounts(hours[hook.ID]), hourCounts(one))
			}
		}
		if got := fmt.Sprint(hourCounts(hours[sibling.ID])); got != "[0/1/0 1/0/0 0/0/0 0/0/0]" {
			t.Fatalf("sibling = %s", got)
		}
		if none, err := model.EndpointsHourly(ctx, db, acc.ID, nil, t0, until); err != nil || len(none) != 0 {
			t.Fatalf("no webhooks = %v, %v", none, err)
		}
	})
}
