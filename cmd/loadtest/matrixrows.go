package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The rows of the matrix scenario. Each prepares one heavy thing account B does, with its scale in
// the table's words, and says where C's webhook goes; matrix.go runs them alike. B's event types
// keep the rows apart: C and the hanging, TLS, auth and burst rows use campaign.created, the heavy
// filters campaign.processing, the filter trials' stored events campaign.completed, the data set
// of recover, portal and lists campaign.updated, the lists' extra webhooks campaign.failed, and
// after them the replay row's data set (its webhooks are deleted by then).

// filterMaxBytes is the API's limit on a filter's JSON (docs/filters.md).
const filterMaxBytes = 4096

// sharedHostHang is issue 17's experiment as a row: B's endpoints on C's host and port read the
// request and never answer, and B publishes a few events to all of them at once.
func (m *matrix) sharedHostHang(ctx context.Context) (*noisyLoad, error) {
	hooks, events := m.cfg.noisyHooks, m.cfg.noisyEvents
	hang := &hangingReceiver{}
	mux := http.NewServeMux()
	mux.Handle("/hang/", hang)
	load, base, err := m.shared(fmt.Sprintf("%d endpoints on C's host and port that never answer; %d events at once (%d attempts)",
		hooks, events, hooks*events), mux, nil, nil)
	if err != nil {
		return nil, err
	}
	load.settle = m.cfg.pause
	var ids []int64
	load.end = m.deleting(&ids)
	if err := m.registerB(ctx, hooks, &ids, func(i int) map[string]any {
		return hookBody(fmt.Sprintf("%s/hang/%d", base, i), "campaign.created")
	}); err != nil {
		return load, err
	}
	t := &opCount{what: "publishes"}
	load.run = func(ctx context.Context) {
		repeatN(ctx, events, events, t, publishAs(m.b, "campaign.created", campaignData("Load")))
	}
	load.work = func() string { return t.String() + "; " + hang.String() }
	return load, nil
}

// sharedHostTLS: C's host requires a client certificate (mutual TLS), which C's webhook has; B's
// webhooks on it have none, so each of their attempts fails its handshake, and B publishes
// steadily.
func (m *matrix) sharedHostTLS(ctx context.Context) (*noisyLoad, error) {
	id, err := newClientIdentity("webhookd loadtest C")
	if err != nil {
		return nil, err
	}
	hooks, rate := m.cfg.matrix.steadyHooks, m.cfg.matrix.steadyRate
	refused := &lineCounter{substr: "TLS handshake error"}
	answered := &hangingReceiver{}
	answered.fast.Store(true)
	mux := http.NewServeMux()
	mux.Handle("/b/", answered)
	mtls := &tls.Config{Certificates: []tls.Certificate{m.cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: id.ca}
	load, base, err := m.shared(fmt.Sprintf("%d webhooks without a client certificate on C's host and port, which requires one; %g events/s",
		hooks, rate), mux, mtls, refused)
	if err != nil {
		return nil, err
	}
	load.cTLS = map[string]any{"clientCert": id.certPEM, "clientKey": id.keyPEM}
	return m.steadyOnSharedHost(ctx, load, func(i int) map[string]any {
		return hookBody(fmt.Sprintf("%s/b/%d", base, i), "campaign.created")
	}, func() string {
		return fmt.Sprintf("%d handshakes refused, %d requests of B's answered", refused.n.Load(), answered.answered.Load())
	})
}

// sharedHostAuth: B's webhooks on C's host and port authenticate with OAuth2 client credentials
// against a token endpoint, on that host too, that refuses them (401 invalid_client), or with
// -matrix-auth-token hang never answers; B publishes steadily.
func (m *matrix) sharedHostAuth(ctx context.Context) (*noisyLoad, error) {
	hooks, rate := m.cfg.matrix.steadyHooks, m.cfg.matrix.steadyRate
	token := &tokenEndpoint{hang: m.cfg.matrix.authToken == "hang"}
	answered := &hangingReceiver{}
	answered.fast.Store(true)
	mux := http.NewServeMux()
	mux.Handle("/b/", answered)
	mux.Handle("/token", token)
	verb := "refuses them (401)"
	if token.hang {
		verb = "never answers"
	}
	load, base, err := m.shared(fmt.Sprintf("%d webhooks on C's host and port with OAuth2 client credentials; the token endpoint (same host) %s; %g events/s",
		hooks, verb, rate), mux, nil, nil)
	if err != nil {
		return nil, err
	}
	auth := map[string]any{"type": "oauth2", "tokenUrl": base + "/token", "clientId": "bench-b", "clientSecret": "bench-b-secret"}
	return m.steadyOnSharedHost(ctx, load, func(i int) map[string]any {
		body := hookBody(fmt.Sprintf("%s/b/%d", base, i), "campaign.created")
		body["auth"] = auth
		return body
	}, func() string {
		return fmt.Sprintf("%d token requests, %d requests of B's answered", token.asked.Load(), answered.answered.Load())
	})
}

// steadyOnSharedHost registers B's webhooks on the shared host (bodyFor(i) each) and makes B's load
// a steady publishing to them; seen tells what B's receiver saw of it.
func (m *matrix) steadyOnSharedHost(ctx context.Context, load *noisyLoad, bodyFor func(i int) map[string]any, seen func() string) (*noisyLoad, error) {
	var ids []int64
	load.end = m.deleting(&ids)
	if err := m.registerB(ctx, m.cfg.matrix.steadyHooks, &ids, bodyFor); err != nil {
		return load, err
	}
	t := &opCount{what: "publishes"}
	load.run = func(ctx context.Context) {
		paced(ctx, m.cfg.matrix.steadyRate, t, publishAs(m.b, "campaign.created", campaignData("Load")))
	}
	load.work = func() string { return t.String() + "; " + seen() }
	return load, nil
}

// heavyFilters: B's webhooks each carry a filter of many substring tests, and B publishes big
// events whose name is one letter repeated, so that intake evaluates every test over the whole
// name for every webhook, and the filters refuse each event.
func (m *matrix) heavyFilters(ctx context.Context) (*noisyLoad, error) {
	mc := m.cfg.matrix
	filter, err := heavyFilter(mc.filterTests, filterMaxBytes)
	if err != nil {
		return nil, err
	}
	data, err := bigCampaign("campaign.processing", mc.eventKiB)
	if err != nil {
		return nil, err
	}
	load, delivered, bBase, err := m.apart(fmt.Sprintf("%d webhooks, each with a filter of %d substring tests (%d bytes); %d publishers of %d KiB events of one letter",
		mc.filterHooks, mc.filterTests, len(filter), mc.publishers, mc.eventKiB))
	if err != nil {
		return nil, err
	}
	var ids []int64
	load.end = m.deleting(&ids)
	if err := m.registerB(ctx, mc.filterHooks, &ids, func(i int) map[string]any {
		body := hookBody(fmt.Sprintf("%s/f/%d", bBase, i), "campaign.processing")
		body["filter"] = filter
		return body
	}); err != nil {
		return load, err
	}
	t := &opCount{what: "publishes"}
	publish := publishAs(m.b, "campaign.processing", data)
	load.run = func(ctx context.Context) {
		repeat(ctx, mc.publishers, t, func(ctx context.Context, _ int) error { return publish(ctx) })
	}
	load.work = func() string { return fmt.Sprintf("%s; %d deliveries", t, delivered.answered.Load()) }
	return load, nil
}

// filterTrials: B tries a heavy filter (POST /webhooks/filter-test) over its stored big events,
// several trials at once, again and again.
func (m *matrix) filterTrials(ctx context.Context) (*noisyLoad, error) {
	mc := m.cfg.matrix
	if err := m.storeBigEvents(ctx); err != nil {
		return nil, err
	}
	filter, err := heavyFilter(mc.filterTests, filterMaxBytes)
	if err != nil {
		return nil, err
	}
	limit := min(mc.stored, 1000) // the API's largest trial
	load, _, _, err := m.apart(fmt.Sprintf("%d concurrent filter trials (%d substring tests) over its %d newest stored %d KiB events",
		mc.trials, mc.filterTests, limit, mc.eventKiB))
	if err != nil {
		return nil, err
	}
	// A trial reads all its events before it matches the first: C probes once they are matching.
	load.settle = mc.trialSettle
	t := &opCount{what: "trials"}
	body := map[string]any{"filter": filter, "eventType": "campaign.completed", "limit": limit}
	load.run = func(ctx context.Context) {
		repeat(ctx, mc.trials, t, func(ctx context.Context, _ int) error {
			var out struct {
				Scanned int `json:"scanned"`
			}
			err := m.b.do(ctx, http.MethodPost, "/api/svc/v2/webhooks/filter-test", body, &out)
			if err == nil {
				t.setNote("each read %d events", out.Scanned)
			}
			return err
		})
	}
	load.work = t.String
	return load, nil
}

// recoverDataset: B recovers (POST /webhooks/<id>/recover) every held delivery of its data set's
// webhook, enabled first, to a receiver of its own that answers at once. The row's end disables
// the webhook again, so that what the recovery has not replayed yet is held at its next attempt.
func (m *matrix) recoverDataset(ctx context.Context) (*noisyLoad, error) {
	d, err := m.ensureDataset(ctx)
	if err != nil {
		return nil, err
	}
	load, delivered, _, err := m.apart(fmt.Sprintf("a recover of its webhook's %d held deliveries, to a receiver of its own that answers at once", d.events))
	if err != nil {
		return nil, err
	}
	hookPath := fmt.Sprintf("/api/svc/v2/webhooks/%d", d.hook)
	if err := m.b.doPatiently(ctx, http.MethodPost, hookPath+"/enable", nil, nil); err != nil {
		return load, fmt.Errorf("enable B's data set webhook: %w", err)
	}
	load.end = func(ctx context.Context) {
		if err := m.b.doPatiently(context.WithoutCancel(ctx), http.MethodPost, hookPath+"/disable", nil, nil); err != nil {
			fmt.Printf("disable B's data set webhook: %v\n", err)
		}
	}
	t := &opCount{what: "recover calls"}
	load.run = func(ctx context.Context) {
		var out struct {
			Queued int `json:"queued"`
		}
		start := time.Now()
		err := m.b.do(ctx, http.MethodPost, hookPath+"/recover", map[string]any{"since": d.since.Format(time.RFC3339)}, &out)
		t.record(ctx, start, err)
		t.setNote("queued %d", out.Queued)
	}
	load.work = func() string { return fmt.Sprintf("%s; %d delivered", t, delivered.answered.Load()) }
	return load, nil
}

// replayDataset: B replays (POST /replays, issue 46) every held delivery of a data set of its own,
// to a receiver of its own that answers at once, and the row waits for the replay to end: the
// whole replay runs beside C's probes, and the table's RSS column is webhookd's peak over it.
// The data set is its own (campaign.failed), so that the recover row's leaves this one's alone.
func (m *matrix) replayDataset(ctx context.Context) (*noisyLoad, error) {
	d, err := m.makeDataset(ctx, "campaign.failed", "/replay", campaignData("Data set"), m.cfg.matrix.dataset)
	if err != nil {
		return nil, err
	}
	load, delivered, _, err := m.apart(fmt.Sprintf("a replay of %d held deliveries (POST /replays), to a receiver of its own that answers at once, waited for to its end", d.events))
	if err != nil {
		return nil, err
	}
	const prefix = "/api/svc/v2"
	hookPath := fmt.Sprintf("%s/webhooks/%d", prefix, d.hook)
	if err := m.b.doPatiently(ctx, http.MethodPost, hookPath+"/enable", nil, nil); err != nil {
		return load, fmt.Errorf("enable B's data set webhook: %w", err)
	}
	var replay struct {
		ID      int64  `json:"id"`
		State   string `json:"state"`
		Matched int    `json:"matched"`
		Sent    int    `json:"sent"`
	}
	var mu sync.Mutex
	load.end = func(ctx context.Context) {
		ctx = context.WithoutCancel(ctx)
		mu.Lock()
		id := replay.ID
		mu.Unlock()
		if id != 0 {
			if err := m.b.do(ctx, http.MethodDelete, fmt.Sprintf("%s/replays/%d", prefix, id), nil, nil); err != nil {
				fmt.Printf("cancel B's replay: %v\n", err)
			}
		}
		if err := m.b.doPatiently(ctx, http.MethodPost, hookPath+"/disable", nil, nil); err != nil {
			fmt.Printf("disable B's data set webhook: %v\n", err)
		}
	}
	t := &opCount{what: "replay calls"}
	load.run = func(ctx context.Context) {
		start := time.Now()
		var got struct {
			ID int64 `json:"id"`
		}
		err := m.b.do(ctx, http.MethodPost, prefix+"/replays", map[string]any{
			"since": d.since.Format(time.RFC3339), "webhookIds": []int64{d.hook}}, &got)
		t.record(ctx, start, err)
		if err != nil {
			return
		}
		mu.Lock()
		replay.ID = got.ID
		mu.Unlock()
		for ctx.Err() == nil {
			sleep(ctx, time.Second)
			mu.Lock()
			err := m.b.do(ctx, http.MethodGet, fmt.Sprintf("%s/replays/%d", prefix, got.ID), nil, &replay)
			state, sent, matched := replay.State, replay.Sent, replay.Matched
			mu.Unlock()
			t.setNote("replay %s: %d of %d sent", state, sent, matched)
			if err == nil && state != "running" {
				return
			}
		}
	}
	load.finish = true
	load.work = func() string { return fmt.Sprintf("%s; %d delivered", t, delivered.answered.Load()) }
	return load, nil
}

// replayFilter: B asks for dry runs of filtered replays (POST /replays with a heavy filter,
// issue 46) over its held deliveries of big events, several at once, again and again. Each match
// judges at most 64 MiB of event data in at most 10 s and is refused past either; an account's
// third at once is refused (docs/api.md, "Replays").
func (m *matrix) replayFilter(ctx context.Context) (*noisyLoad, error) {
	mc := m.cfg.matrix
	data, err := bigCampaign("campaign.processing", mc.eventKiB)
	if err != nil {
		return nil, err
	}
	d, err := m.makeDataset(ctx, "campaign.processing", "/replay-filter", data, mc.stored)
	if err != nil {
		return nil, err
	}
	filter, err := heavyFilter(mc.filterTests, filterMaxBytes)
	if err != nil {
		return nil, err
	}
	load, _, _, err := m.apart(fmt.Sprintf("%d concurrent filtered replay dry runs (%d substring tests) over its %d held deliveries of %d KiB events",
		mc.trials, mc.filterTests, d.events, mc.eventKiB))
	if err != nil {
		return nil, err
	}
	// A match reads its first page before it judges any: C probes once they are judging.
	load.settle = mc.trialSettle
	t := &opCount{what: "dry runs"}
	body := map[string]any{"since": d.since.Format(time.RFC3339), "webhookIds": []int64{d.hook}, "states": []string{"exhausted"},
		"filter": filter, "dryRun": true}
	// The dry runs admitted (not 429) and how the last of them ended: the table's "last" error is
	// most often a refused one's.
	var admitted atomic.Int64
	load.run = func(ctx context.Context) {
		repeat(ctx, mc.trials, t, func(ctx context.Context, _ int) error {
			var out struct {
				Matched int `json:"matched"`
			}
			err := m.b.do(ctx, http.MethodPost, "/api/svc/v2/replays", body, &out)
			switch {
			case err == nil:
				t.setNote("%d admitted, the last matched %d", admitted.Add(1), out.Matched)
			case ctx.Err() == nil && !strings.Contains(err.Error(), ": 429 "):
				msg := err.Error()
				t.setNote("%d admitted, the last answered %s", admitted.Add(1), msg[:min(len(msg), 160)])
			}
			return err
		})
	}
	load.work = t.String
	return load, nil
}

// burst: B publishes many events as fast as cfg.concurrency publishers can, to one webhook of its
// own that answers at once; the row waits for the last publish before it deletes the webhook.
func (m *matrix) burst(ctx context.Context) (*noisyLoad, error) {
	n, publishers := m.cfg.matrix.burst, m.cfg.concurrency
	load, delivered, bBase, err := m.apart(fmt.Sprintf("a burst of %d events, %d publishers, to one webhook of its own that answers at once", n, publishers))
	if err != nil {
		return nil, err
	}
	var ids []int64
	load.end = m.deleting(&ids)
	if err := m.registerB(ctx, 1, &ids, func(int) map[string]any { return hookBody(bBase+"/burst", "campaign.created") }); err != nil {
		return load, err
	}
	t := &opCount{what: "publishes"}
	load.run = func(ctx context.Context) {
		repeatN(ctx, n, publishers, t, publishAs(m.b, "campaign.created", campaignData("Load")))
	}
	load.finish = true
	load.work = func() string { return fmt.Sprintf("%s; %d delivered", t, delivered.answered.Load()) }
	return load, nil
}

// orderedHotKey: the burst's publishing to one ordered webhook of B's (docs/ordering.md) whose
// events all carry one key, the heaviest an ordering allows: every publish takes the one lane's row
// lock at intake, and every delivery waits in that lane for the one before it, each started by the
// one before it in the worker.
func (m *matrix) orderedHotKey(ctx context.Context) (*noisyLoad, error) {
	n, publishers := m.cfg.matrix.burst, m.cfg.concurrency
	load, delivered, bBase, err := m.apart(fmt.Sprintf("a burst of %d events, %d publishers, to one webhook of its own ordered by data.id, every event with one id (one lane); it answers at once", n, publishers))
	if err != nil {
		return nil, err
	}
	var ids []int64
	load.end = m.deleting(&ids)
	if err := m.registerB(ctx, 1, &ids, func(int) map[string]any {
		body := hookBody(bBase+"/ordered", "campaign.created")
		body["ordering"] = map[string]any{"key": "data.id"}
		return body
	}); err != nil {
		return load, err
	}
	t := &opCount{what: "publishes"}
	load.run = func(ctx context.Context) {
		repeatN(ctx, n, publishers, t, publishAs(m.b, "campaign.created", campaignData("Load")))
	}
	load.finish = true
	load.work = func() string { return fmt.Sprintf("%s; %d delivered", t, delivered.answered.Load()) }
	return load, nil
}

// portal: B's readers, each in a portal session of its own, read the endpoints page, the event
// log's first page and one in the middle of the data set, and the data set webhook's page, in
// turn, again and again.
func (m *matrix) portal(ctx context.Context) (*noisyLoad, error) {
	d, err := m.ensureDataset(ctx)
	if err != nil {
		return nil, err
	}
	n := m.cfg.matrix.readers
	load, _, _, err := m.apart(fmt.Sprintf("%d readers of its portal pages (endpoints, event log, a page in the middle of %d events, the page of their endpoint)", n, d.events))
	if err != nil {
		return nil, err
	}
	pages := []string{"/portal/", "/portal/events", fmt.Sprintf("/portal/events?before=%d", (d.firstEvent+d.lastEvent)/2),
		fmt.Sprintf("/portal/webhooks/%d", d.hook)}
	readers := make([]*portalReader, n)
	for i := range readers {
		if readers[i], err = openPortal(ctx, m.b, pages); err != nil {
			return load, err
		}
		readers[i].i = i // the readers start on different pages
	}
	t := &opCount{what: "pages"}
	load.run = func(ctx context.Context) {
		repeat(ctx, n, t, func(ctx context.Context, w int) error { return readers[w].readNext(ctx) })
	}
	load.work = t.String
	return load, nil
}

// lists: B's readers page through its long lists, ?limit=200 following each page's Link, and
// start again at the end: its webhooks (filled up to -matrix-list-hooks), the data set webhook's
// deliveries, and its event log (the data set's events, the filter trials' big ones, the rest).
func (m *matrix) lists(ctx context.Context) (*noisyLoad, error) {
	d, err := m.ensureDataset(ctx)
	if err != nil {
		return nil, err
	}
	mc := m.cfg.matrix
	have, err := m.b.listWebhooks(ctx, "limit=200")
	if err != nil {
		return nil, fmt.Errorf("account B's webhooks: %w", err)
	}
	load, _, bBase, err := m.apart(fmt.Sprintf("%d readers paging through its %d webhooks, %d deliveries of one, and its event log, ?limit=200",
		mc.readers, max(mc.listHooks, len(have)), d.events))
	if err != nil {
		return nil, err
	}
	var ids []int64
	load.end = m.deleting(&ids)
	if add := mc.listHooks - len(have); add > 0 {
		if err := m.registerB(ctx, add, &ids, func(i int) map[string]any {
			return hookBody(fmt.Sprintf("%s/l/%d", bBase, i), "campaign.failed")
		}); err != nil {
			return load, err
		}
	}
	firsts := []string{"/api/svc/v2/webhooks?limit=200", fmt.Sprintf("/api/svc/v2/webhooks/%d/deliveries?limit=200", d.hook), "/api/svc/v2/events?limit=200"}
	walkers := make([]*pageWalker, mc.readers)
	for i := range walkers {
		walkers[i] = &pageWalker{c: m.b, first: firsts[i%len(firsts)]}
	}
	t := &opCount{what: "pages"}
	load.run = func(ctx context.Context) {
		repeat(ctx, mc.readers, t, func(ctx context.Context, w int) error { return walkers[w].read(ctx) })
	}
	load.work = func() string {
		var read int64
		for _, w := range walkers {
			read += w.bytes.Load()
		}
		return fmt.Sprintf("%s; %.0f MB read", t, float64(read)/1e6)
	}
	return load, nil
}

// dataset is B's webhook with many held deliveries, one per event: what the recover row replays
// and the portal and lists rows read. Its webhook is disabled while the events are published, so
// each delivery is held as exhausted without an attempt on the network (docs/api.md, "Disabling a
// webhook").
type dataset struct {
	hook                  int64
	since                 time.Time // before the webhook was registered: the window to recover
	events                int
	firstEvent, lastEvent int64
}

// ensureDataset makes B's data set once, then waits until the stack is quiet again.
func (m *matrix) ensureDataset(ctx context.Context) (*dataset, error) {
	if m.data != nil {
		return m.data, nil
	}
	d, err := m.makeDataset(ctx, "campaign.updated", "/data", campaignData("Data set"), m.cfg.matrix.dataset)
	if err == nil {
		m.data = d
	}
	return d, err
}

// makeDataset registers a disabled webhook of B's for eventType at path on the hanging receiver
// and publishes n events of that type with data, each a delivery held as exhausted; then it waits
// until the stack is quiet again.
func (m *matrix) makeDataset(ctx context.Context, eventType, path string, data any, n int) (*dataset, error) {
	d := &dataset{since: time.Now().Add(-2 * time.Second).UTC().Truncate(time.Second), events: n}
	fmt.Printf("B's data set: a disabled %s webhook and %d events, each a delivery held as exhausted\n", eventType, n)
	var err error
	if d.hook, err = m.b.registerWebhook(ctx, hookBody("https://"+m.cfg.hangListen+path, eventType)); err != nil {
		return nil, fmt.Errorf("account B's data set webhook: %w", err)
	}
	if err := m.b.doPatiently(ctx, http.MethodPost, fmt.Sprintf("/api/svc/v2/webhooks/%d/disable", d.hook), nil, nil); err != nil {
		return nil, fmt.Errorf("disable B's data set webhook: %w", err)
	}
	var mu sync.Mutex
	t := &opCount{what: "publishes"}
	start := time.Now()
	repeatN(ctx, n, m.cfg.concurrency, t, func(ctx context.Context) error {
		return retryBusy(ctx, func() error {
			res, err := m.b.publishEvent(ctx, eventType, data)
			if err == nil {
				mu.Lock()
				if d.firstEvent == 0 || res.ID < d.firstEvent {
					d.firstEvent = res.ID
				}
				d.lastEvent = max(d.lastEvent, res.ID)
				mu.Unlock()
			}
			return err
		})
	})
	fmt.Printf("B's data set: %s in %s\n", t, time.Since(start).Round(time.Second))
	if err := t.err(); err != nil {
		return nil, fmt.Errorf("account B's data set: %w", err)
	}
	m.quiet(ctx, "after B's data set", m.cfg.matrix.drainMax)
	return d, ctx.Err()
}

// storeBigEvents stores B's big events for the filter trials once (campaign.completed, which no
// webhook takes), then waits until the stack is quiet again.
func (m *matrix) storeBigEvents(ctx context.Context) error {
	if m.bigStored {
		return nil
	}
	mc := m.cfg.matrix
	data, err := bigCampaign("campaign.completed", mc.eventKiB)
	if err != nil {
		return err
	}
	fmt.Printf("B stores %d events of %d KiB (campaign.completed, which no webhook takes)\n", mc.stored, mc.eventKiB)
	t := &opCount{what: "publishes"}
	start := time.Now()
	publish := publishAs(m.b, "campaign.completed", data)
	repeatN(ctx, mc.stored, mc.publishers, t, func(ctx context.Context) error {
		return retryBusy(ctx, func() error { return publish(ctx) })
	})
	fmt.Printf("B's stored events: %s in %s\n", t, time.Since(start).Round(time.Second))
	if err := t.err(); err != nil {
		return fmt.Errorf("account B's stored events: %w", err)
	}
	m.bigStored = true
	m.quiet(ctx, "after B's stored events", m.cfg.matrix.drainMax)
	return ctx.Err()
}

// hookBody is a POST /webhooks body.
func hookBody(url, eventType string) map[string]any {
	return map[string]any{"url": url, "eventType": eventType}
}

// publishAs is an operation that publishes one event as c.
func publishAs(c *apiClient, eventType string, data any) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.publishEvent(ctx, eventType, data)
		return err
	}
}

// tokenEndpoint is an OAuth2 token endpoint that refuses every client (401 invalid_client), or,
// with hang, never answers.
type tokenEndpoint struct {
	hang  bool
	asked atomic.Int64
}

func (t *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.asked.Add(1)
	if t.hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
}
