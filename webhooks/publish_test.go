package webhooks_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// gatedVersions is sources' table of event versions with one more version of one event type,
// reading as the one before it, whose first conversion down waits for the test: a filter of a
// webhook pinned to the older version reads the converted body, so the publish that judges that
// filter stops in the middle of judging, where the test looks at what it holds.
type gatedVersions struct {
	model.EventVersions
	eventType string
	judging   chan struct{} // receives once, when the conversion begins
	release   chan struct{} // closed by the test (release) to let it end
	once      sync.Once
	closed    sync.Once
	converted atomic.Int32 // conversions of eventType's data
}

// gateVersions is a gatedVersions for eventType, for the test's use cases (webhookstest.Config).
func gateVersions(t *testing.T, eventType string) *gatedVersions {
	g := &gatedVersions{EventVersions: sources.Versions(), eventType: eventType, judging: make(chan struct{}, 1), release: make(chan struct{})}
	// The conversion is released before the database closes, whatever the test's outcome.
	t.Cleanup(g.open)
	return g
}

// open lets the held conversion, and every later one, end.
func (g *gatedVersions) open() { g.closed.Do(func() { close(g.release) }) }

func (g *gatedVersions) Latest(eventType string) int {
	n := g.EventVersions.Latest(eventType)
	if eventType == g.eventType {
		n++
	}
	return n
}

func (g *gatedVersions) Downgrade(eventType string, data json.RawMessage, from, to int) (json.RawMessage, error) {
	if eventType != g.eventType {
		return g.EventVersions.Downgrade(eventType, data, from, to)
	}
	g.converted.Add(1)
	g.once.Do(func() {
		g.judging <- struct{}{}
		<-g.release
	})
	if to < from-1 {
		return g.EventVersions.Downgrade(eventType, data, from-1, to)
	}
	return data, nil
}

// TestPublishJudgesFiltersBeforeItsTransaction (issue 40): a publish's payload filters are judged
// before its transaction begins, so that no lock is held while they run. Account B's publish is held
// in the middle of judging its filters; meanwhile account C's publish completes (on SQLite, one
// that holds the write lock while judging would keep C waiting until SQLite gives up), and B's
// webhooks change. B's event then reaches its webhooks as they are when its transaction runs: a
// filter changed since is judged anew, a webhook added is judged, a deleted one gets nothing, and
// the verdicts of the unchanged filters are those judged before.
func TestPublishJudgesFiltersBeforeItsTransaction(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		const eventType = "lead.captured"
		gate := gateVersions(t, eventType)
		s := webhookstest.New(t, db, nil, slog.New(slog.DiscardHandler), webhookstest.Config{MaxWebhooks: 100, Versions: gate}) // no secret is sealed
		b, c := scopeOf(t, db, model.VariantB), scopeOf(t, db, model.VariantB)
		mk := func(scope model.WebhookScope, filter string, version int) int64 {
			t.Helper()
			if version == 0 {
				// The newest, as a registration gives it (webhooks.Service.Create).
				version = model.LatestVersion(gate, eventType)
			}
			w := &model.Webhook{AccountID: scope.AccountID, Variant: scope.Variant, URL: "https://r.example.com/", EventType: eventType,
				Status: model.StatusActive, Secret: "v1:x", Version: version, CreatedAt: model.Now(), UpdatedAt: model.Now()}
			if filter != "" {
				w.Filter = &filter
			}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
			return w.ID
		}
		older := model.LatestVersion(gate, eventType) - 1
		pinned := mk(b, `{"data":{"country":"DE"}}`, older) // judging it converts the data: the gate
		refused := mk(b, `{"data":{"country":"FR"}}`, 0)
		changed := mk(b, `{"data":{"country":"FR"}}`, 0)
		deleted := mk(b, `{"data":{"country":"DE"}}`, 0)
		plainC := mk(c, "", 0)

		type outcome struct {
			res *model.PublishResult
			err error
		}
		published := make(chan outcome, 1)
		go func() {
			res, err := s.Publish(ctx, model.NewEvent{AccountID: b.AccountID, Variant: b.Variant, EventType: eventType, Data: `{"country":"DE"}`})
			published <- outcome{res, err}
		}()
		<-gate.judging

		resC, err := s.Publish(ctx, model.NewEvent{AccountID: c.AccountID, Variant: c.Variant, EventType: eventType, Data: `{"country":"FR"}`})
		if err != nil {
			t.Fatalf("account C's publish while account B's filters were being judged: %v", err)
		}
		if len(resC.Deliveries) != 1 || resC.Deliveries[0].WebhookID != plainC {
			t.Fatalf("account C's deliveries: %+v", resC.Deliveries)
		}
		select {
		case o := <-published:
			t.Fatalf("account B's publish ended (%v) while its filters were held", o.err)
		default:
		}

		// B's webhooks change between the judging and the transaction.
		added := mk(b, `{"data":{"country":{"$in":["DE","AT"]}}}`, 0)
		addedRefused := mk(b, `{"data":{"country":"IT"}}`, 0)
		if _, err := s.SetSettings(ctx, b, changed, webhooks.Settings{Filter: webhooks.FilterEdit{Set: true, JSON: json.RawMessage(`{"data":{"country":"DE"}}`)}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, b, deleted); err != nil {
			t.Fatal(err)
		}
		gate.open()
		o := <-published
		if o.err != nil {
			t.Fatalf("account B's publish: %v", o.err)
		}
		got := map[int64]bool{}
		for _, d := range o.res.Deliveries {
			got[d.WebhookID] = true
		}
		want := map[int64]bool{pinned: true, changed: true, added: true}
		if len(got) != len(want) || !got[pinned] || !got[changed] || !got[added] {
			t.Errorf("account B's event reached %v; want %v (not the refused %d and %d, nor the deleted %d)", got, want, refused, addedRefused, deleted)
		}
		if ev := o.res.Event; ev.Matched != 3 || ev.Filtered != 2 || len(o.res.Overran) != 0 {
			t.Errorf("matched %d, filtered %d, overran %v; want 3, 2, none", ev.Matched, ev.Filtered, o.res.Overran)
		}
		// The pinned webhook's verdict, judged before, was taken as it was: its body was not
		// built again in the transaction.
		if n := gate.converted.Load(); n != 1 {
			t.Errorf("the data was converted to the pinned webhook's version %d times; want once, before the transaction", n)
		}
	})
}

// TestPublishFilterOverrunCounted: a webhook whose filter runs out of its budget gets the event,
// counts on webhookd_filter_overruns_total at every publish, and is logged once, without the
// event's data.
func TestPublishFilterOverrunCounted(t *testing.T) {
	db := dbtest.SQLite(t)
	overruns, err := dispatch.NewFilterOverrunsMetric(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s, err := webhooks.New(webhooks.Config{DB: db, Logger: slog.New(slog.NewTextHandler(&logged, nil)), MaxWebhooks: 10,
		RequestTimeout: time.Second, FilterOverruns: overruns})
	if err != nil {
		t.Fatal(err)
	}
	scope := scopeOf(t, db, model.VariantB)
	costly := hostileFilter(0)
	w := &model.Webhook{AccountID: scope.AccountID, Variant: scope.Variant, URL: "https://r.example.com/", EventType: "lead.captured",
		Status: model.StatusActive, Secret: "v1:x", Filter: &costly, CreatedAt: model.Now(), UpdatedAt: model.Now()}
	if err := model.CreateWebhook(t.Context(), db, w, 10); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := s.Publish(t.Context(), model.NewEvent{AccountID: scope.AccountID, Variant: scope.Variant, EventType: "lead.captured", Data: hostileData()})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Deliveries) != 1 || !slices.Equal(res.Overran, []int64{w.ID}) {
			t.Fatalf("deliveries %+v, overran %v; want webhook %d, unjudged", res.Deliveries, res.Overran, w.ID)
		}
	}
	if got := testutil.ToFloat64(overruns.WithLabelValues(string(model.VariantB))); got != 2 {
		t.Errorf("webhookd_filter_overruns_total{variant=B} = %v, want 2", got)
	}
	lines := strings.Count(logged.String(), "ran out of its budget")
	if lines != 1 || !strings.Contains(logged.String(), fmt.Sprintf("webhook=%d", w.ID)) || strings.Contains(logged.String(), "aaaaaaaa") {
		t.Errorf("log: %q; want one line naming webhook %d, without the event's data", logged.String(), w.ID)
	}
}
