package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/api"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// Issue 18's burst, scaled to a test: events of 250 KB that add up to ten pages' budget, read by 20
// clients at once with the largest limit.
const (
	bigEvents     = 40
	bigEventBytes = 250_000
	burstClients  = 20
)

// perRequestHeap is what one list request may hold at once: the page's rows (at most
// api.MaxPageBytes of data), a second copy of them while the driver hands them over, and the item
// being written (its data copied and marshalled): four pages' worth at most.
const perRequestHeap = 4 * api.MaxPageBytes

// heapBound is the most the heap may hold during the burst: what was live before it plus every
// request's share, twice over, since the collector lets the heap grow to twice what is live
// (GOGC=100, which the test sets) before it collects. Before pages were bounded by bytes each request
// of the burst held its 10 MB page several times over, and the heap reached far beyond this.
func heapBound(baseline uint64) uint64 { return 2 * (baseline + burstClients*perRequestHeap) }

// bigData is the example data of the variant with a name of n bytes.
func bigData(v variantCase, n int) map[string]any {
	data := map[string]any{}
	for k, val := range validData[v.name].(map[string]any) {
		data[k] = val
	}
	data["name"] = strings.Repeat("x", n)
	return data
}

// listedData is a list response's items, each with its data as the bytes sent.
type listedData struct {
	Data []struct {
		ID   int64           `json:"id"`
		Data json.RawMessage `json:"data"`
	} `json:"data"`
}

// TestListPagesBoundedByBytes: issue 18's burst. Events whose data adds up to ten times a page's
// budget come back in pages of at most api.MaxPageBytes of data each (fewer than limit), every event
// exactly once by following Link; twenty concurrent reads with limit=200 keep the heap under a
// bound derived from the budget.
func TestListPagesBoundedByBytes(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		// Stored as intake stores them (the API's own intake of 250 KB bodies is tested elsewhere
		// and would only slow this test down).
		ctx := context.Background()
		key, acc, err := model.CreateAPIKey(ctx, e.db, fmt.Sprintf("big%d@example.com", accountSeq.Add(1)), "test")
		if err != nil {
			t.Fatal(err)
		}
		auth := v.auth(key)
		raw, err := json.Marshal(bigData(v, bigEventBytes))
		if err != nil {
			t.Fatal(err)
		}
		data, err := wire.CanonicalJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		var published []int64
		for range bigEvents {
			res, err := model.InsertEvent(ctx, e.db, model.NewEvent{AccountID: acc.ID, Variant: map[string]model.Variant{"A": model.VariantA, "B": model.VariantB}[v.name],
				EventType: v.eventType, Data: string(data)})
			if err != nil {
				t.Fatal(err)
			}
			published = append(published, res.Event.ID)
		}
		t.Run("burst", func(t *testing.T) {
			srv := httptest.NewServer(e.srv)
			defer srv.Close()
			defer debug.SetGCPercent(debug.SetGCPercent(100))
			runtime.GC()
			baseline := heapObjects()
			peak := sampleHeap()
			var wg sync.WaitGroup
			errs := make(chan error, burstClients)
			for range burstClients {
				wg.Go(func() {
					req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+eventsPath(v)+"?limit=200", nil)
					if err != nil {
						errs <- err
						return
					}
					auth(req)
					res, err := srv.Client().Do(req)
					if err != nil {
						errs <- err
						return
					}
					defer res.Body.Close()
					n, err := io.Copy(io.Discard, res.Body)
					if err == nil && (res.StatusCode != http.StatusOK || n == 0 || res.Header.Get("Link") == "") {
						err = fmt.Errorf("status %d, %d bytes, Link %q", res.StatusCode, n, res.Header.Get("Link"))
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			got := peak()
			bound := heapBound(baseline)
			t.Logf("heap: %d MiB before, peak %d MiB, bound %d MiB", baseline>>20, got>>20, bound>>20)
			if got > bound {
				t.Fatalf("peak heap %d MiB over the bound %d MiB (before the burst %d MiB, %d clients, %d MiB of data per page)",
					got>>20, bound>>20, baseline>>20, burstClients, api.MaxPageBytes>>20)
			}
		})

		// Paging by Link returns every event once, in order, each page within the budget.
		var seen []int64
		path := eventsPath(v) + "?limit=200"
		for pages := 0; path != ""; pages++ {
			if pages > 2*bigEvents {
				t.Fatal("pagination does not end")
			}
			r := e.do(t, "GET", path, auth, "")
			r.expect(t, http.StatusOK, "")
			var page listedData
			if err := json.Unmarshal(r.raw, &page); err != nil {
				t.Fatal(err)
			}
			var bytes int
			for _, it := range page.Data {
				seen = append(seen, it.ID)
				bytes += len(it.Data)
			}
			if len(page.Data) == 0 || bytes > api.MaxPageBytes+bigEventBytes+100 {
				t.Fatalf("page %d: %d events with %d bytes of data, budget %d plus one event", pages, len(page.Data), bytes, api.MaxPageBytes)
			}
			path = nextLink(t, r)
			if path != "" && !strings.Contains(path, "limit=200") {
				t.Fatalf("Link %q does not keep limit=200", path)
			}
		}
		if !slices.Equal(seen, published) {
			t.Fatalf("paged ids = %v, want %v", seen, published)
		}
	})
}

// TestDeliveryPagesBoundedByBytes: a webhook's delivery log, whose attempts' response bodies and
// headers add up to several pages' budget, pages newest first within the budget, every delivery
// exactly once by following Link.
func TestDeliveryPagesBoundedByBytes(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		ctx := context.Background()
		auth := v.auth(newKey(t, e.db))
		r := e.do(t, "POST", v.collection, auth, createBody("https://log.example.com/", v.eventType))
		r.expect(t, http.StatusCreated, "")
		hook := int64(r.data(t)["id"].(float64))
		// 60 deliveries of 6 attempts, each with a 4 KiB body and 1 KiB of headers: 1.8 MB, about
		// two pages.
		const deliveries, attempts, body, headers = 60, 6, 4 << 10, 1 << 10
		padded := map[int64]bool{}
		for range deliveries {
			ev := e.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, validData[v.name]))
			ev.expect(t, http.StatusAccepted, "")
			var d model.Delivery
			if err := e.db.NewSelect().Model(&d).Where("event_id = ?", int64(ev.data(t)["id"].(float64))).Where("webhook_id = ?", hook).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			h := fmt.Sprintf(`{"x-pad":%q}`, strings.Repeat("h", headers-12))
			for i := range attempts {
				b, status := strings.Repeat("b", body), 500
				a := &model.Attempt{DeliveryID: d.ID, Attempt: i + 1, URL: "https://log.example.com/", StartedAt: time.Now(), StatusCode: &status,
					ResponseBody: &b, RequestHeaders: &h}
				if _, err := e.db.NewInsert().Model(a).Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
			padded[d.ID] = true
		}
		// Variant B's registration sent a test event: its delivery is listed too.
		var want []int64
		if err := e.db.NewSelect().Model((*model.Delivery)(nil)).Column("id").Where("webhook_id = ?", hook).OrderExpr("id DESC").Scan(ctx, &want); err != nil {
			t.Fatal(err)
		}
		var seen []int64
		path := fmt.Sprintf("%s/%d/deliveries?limit=200", v.collection, hook)
		pages := 0
		for ; path != ""; pages++ {
			if pages > deliveries {
				t.Fatal("pagination does not end")
			}
			r := e.do(t, "GET", path, auth, "")
			r.expect(t, http.StatusOK, "")
			var page struct {
				Data []struct {
					ID         int64 `json:"id"`
					AttemptLog []struct {
						ResponseBody   string          `json:"responseBody"`
						RequestHeaders json.RawMessage `json:"requestHeaders"`
					} `json:"attemptLog"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.raw, &page); err != nil {
				t.Fatal(err)
			}
			var bytes int
			for _, d := range page.Data {
				seen = append(seen, d.ID)
				if padded[d.ID] && len(d.AttemptLog) != attempts {
					t.Fatalf("delivery %d lists %d attempts, want %d", d.ID, len(d.AttemptLog), attempts)
				}
				for _, a := range d.AttemptLog {
					bytes += len(a.ResponseBody) + len(a.RequestHeaders)
				}
			}
			if len(page.Data) == 0 || bytes > api.MaxPageBytes {
				t.Fatalf("page %d: %d deliveries with %d bytes of attempts, budget %d", pages, len(page.Data), bytes, api.MaxPageBytes)
			}
			path = nextLink(t, r)
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("paged ids = %v, want %v", seen, want)
		}
		if pages < 2 {
			t.Fatalf("%d page(s) for 1.8 MB of attempts", pages)
		}
	})
}

// nextLink is the path a response's Link rel="next" points to, or "" on the last page.
func nextLink(t *testing.T, r response) string {
	t.Helper()
	link := r.header.Get("Link")
	if link == "" {
		return ""
	}
	target, rel, ok := strings.Cut(link, ">; ")
	if !ok || rel != `rel="next"` || !strings.HasPrefix(target, "<") {
		t.Fatalf("Link %q", link)
	}
	return strings.TrimPrefix(target, "<")
}

// heapObjects is the bytes of heap objects, live or not yet collected.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleHeap samples heapObjects every millisecond until the returned func is called, which returns
// the largest sample.
func sampleHeap() (peak func() uint64) {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		top := heapObjects()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- max(top, heapObjects())
				return
			case <-tick.C:
				top = max(top, heapObjects())
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
