//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

// TestPayloadFilters runs issue 29 on the real stack, in both variants: two webhooks on one event
// type, one with a filter; events that pass it and events that do not. The filtered webhook's
// receiver gets exactly the passing ones; a refused pair has no delivery row and no workflow; the
// event log counts it as filtered; filter-test over the same events agrees with what delivery did;
// and PATCH {"filter": null} restores full delivery.
func TestPayloadFilters(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.rc.setRespond(func(int, string, http.ResponseWriter) {})
	for _, c := range []struct {
		variant, eventType string
		filter             map[string]any
		data               func(i int) map[string]any
		pass               func(i int) bool
	}{
		{"A", "campaign.created", map[string]any{"data": map[string]any{"budget": map[string]any{"$gte": 1000}}},
			func(i int) map[string]any {
				d := maps.Clone(campaign)
				d["id"], d["budget"] = i+1, float64(i*400)
				return d
			}, func(i int) bool { return i*400 >= 1000 }},
		{"B", "lead.captured", map[string]any{"data": map[string]any{"source": map[string]any{"country": map[string]any{"$in": []string{"DE", "AT"}}}}},
			func(i int) map[string]any {
				d := maps.Clone(sampleData["lead.captured"].(map[string]any))
				src := maps.Clone(d["source"].(map[string]any))
				src["country"] = []string{"DE", "FR", "AT", "US", "DE"}[i%5]
				d["source"], d["collectDataId"] = src, fmt.Sprintf("blk_%d", i)
				return d
			}, func(i int) bool { return i%5 != 1 && i%5 != 3 }},
	} {
		t.Run(c.variant, func(t *testing.T) {
			plain, _ := st.createWebhook(t, c.variant, st.rc.url("/filter/plain/"+c.variant), c.eventType)
			picky, _ := st.createWebhook(t, c.variant, st.rc.url("/filter/picky/"+c.variant), c.eventType)
			path := fmt.Sprintf("%s/webhooks/%d", collection(c.variant), picky)
			status, body, _ := st.call(t, c.variant, "PATCH", path, map[string]any{"filter": c.filter})
			if status != http.StatusOK || body["data"].(map[string]any)["filter"] == nil {
				t.Fatalf("PATCH filter: %d %v", status, body)
			}
			var events []int64
			var passing []string
			for i := range 6 {
				ev := st.publish(t, c.variant, c.eventType, c.data(i))
				events = append(events, ev)
				if c.pass(i) {
					passing = append(passing, wire.MessageID(ev, picky))
				}
			}
			slices.Sort(passing)
			// Every event reaches the plain webhook; the picky one gets the passing ones, and only
			// once the plain one got the last event (published last) can nothing more be on its way.
			// Variant B's test events after registration are not this test's: they are not filtered.
			received := func(path string, hook int64) []string {
				var ids []string
				for _, r := range st.rc.requests(path) {
					id := r.Header.Get("Webhook-Id")
					if slices.ContainsFunc(events, func(ev int64) bool { return wire.MessageID(ev, hook) == id }) {
						ids = append(ids, id)
					}
				}
				slices.Sort(ids)
				return ids
			}
			eventually(t, 30*time.Second, "every delivery to the plain webhook", func() bool {
				return len(received("/filter/plain/"+c.variant, plain)) == len(events)
			})
			eventually(t, 30*time.Second, "the passing deliveries to the filtered webhook", func() bool {
				return len(received("/filter/picky/"+c.variant, picky)) >= len(passing)
			})
			if got := received("/filter/picky/"+c.variant, picky); !slices.Equal(got, passing) {
				t.Fatalf("the filtered webhook got %v, want exactly %v", got, passing)
			}
			refusedCount := len(events) - len(passing)
			if got := st.counter(t, "webhookd_filter_skips_total", "variant", c.variant); got != float64(refusedCount) {
				t.Errorf("webhookd_filter_skips_total{variant=%q} = %v, want %d", c.variant, got, refusedCount)
			}
			var matchedIDs []float64
			for i, ev := range events {
				n, err := st.db.NewSelect().Model((*model.Delivery)(nil)).Where("event_id = ? AND webhook_id = ?", ev, picky).Count(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				_, werr := st.tc.DescribeWorkflowExecution(context.Background(), workflows.DeliveryWorkflowID(ev, picky), "")
				var nf *serviceerror.NotFound
				switch {
				case c.pass(i) && (n != 1 || werr != nil):
					t.Errorf("event %d passes the filter: %d deliveries, workflow %v", ev, n, werr)
				case !c.pass(i) && (n != 0 || !errors.As(werr, &nf)):
					t.Errorf("event %d is refused by the filter: %d deliveries, workflow %v (want none)", ev, n, werr)
				}
				if c.pass(i) {
					matchedIDs = append([]float64{float64(ev)}, matchedIDs...) // newest first
				}
				_, detail, _ := st.call(t, c.variant, "GET", fmt.Sprintf("%s/events/%d", collection(c.variant), ev), nil)
				d := detail["data"].(map[string]any)
				wantMatched, wantFiltered := 2.0, 0.0
				if !c.pass(i) {
					wantMatched, wantFiltered = 1, 1
				}
				if d["matched"] != wantMatched || d["filtered"] != wantFiltered {
					t.Errorf("event %d in the log: matched %v, filtered %v; want %v, %v", ev, d["matched"], d["filtered"], wantMatched, wantFiltered)
				}
			}
			// filter-test over the same events says what delivery did.
			status, body, _ = st.call(t, c.variant, "POST", collection(c.variant)+"/webhooks/filter-test",
				map[string]any{"filter": c.filter, "eventType": c.eventType, "limit": len(events)})
			if status != http.StatusOK {
				t.Fatalf("filter-test: %d %v", status, body)
			}
			trial := body["data"].(map[string]any)
			ids := []float64{}
			for _, id := range trial["matchedIds"].([]any) {
				ids = append(ids, id.(float64))
			}
			if trial["scanned"] != float64(len(events)) || trial["matched"] != float64(len(passing)) || !slices.Equal(ids, matchedIDs) {
				t.Fatalf("filter-test: %v, want %d scanned, %d matched, ids %v", trial, len(events), len(passing), matchedIDs)
			}
			// Without its filter the webhook gets every event again, from the next one on.
			status, body, _ = st.call(t, c.variant, "PATCH", path, map[string]any{"filter": nil})
			if status != http.StatusOK || body["data"].(map[string]any)["filter"] != nil {
				t.Fatalf("PATCH filter null: %d %v", status, body)
			}
			refused := 1 // c.data(1) is refused by both filters
			ev := st.publish(t, c.variant, c.eventType, c.data(refused))
			eventually(t, 30*time.Second, "the refused event, once the filter is gone", func() bool {
				return slices.ContainsFunc(st.rc.requests("/filter/picky/"+c.variant), func(r receivedRequest) bool {
					return r.Header.Get("Webhook-Id") == wire.MessageID(ev, picky)
				})
			})
		})
	}
}
