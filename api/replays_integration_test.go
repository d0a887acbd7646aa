//go:build integration

package api_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect"
	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/worker"
	"github.com/webhookd/webhookd/workflows"
)

// replayReceiver is an HTTPS receiver that fails every POST until told to take them, and counts
// the POSTs it took by path and event (the data's "n" key).
type replayReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	take  bool
	taken map[string]int
}

func newReplayReceiver(t *testing.T) *replayReceiver {
	rr := &replayReceiver{taken: map[string]int{}}
	rr.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Data map[string]any `json:"data"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		rr.mu.Lock()
		defer rr.mu.Unlock()
		if !rr.take {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rr.taken[fmt.Sprintf("%s:%v", r.URL.Path, body.Data[replayKey(r.URL.Path)])]++
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rr.Close)
	return rr
}

// replayKey is the data field that numbers a fixture's events: budget in variant A, brandId in B.
func replayKey(path string) string {
	if strings.HasPrefix(path, "/B") {
		return "brandId"
	}
	return "budget"
}

func (rr *replayReceiver) takeFromNow() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.take = true
}

func (rr *replayReceiver) counts() map[string]int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	out := map[string]int{}
	for k, n := range rr.taken {
		out[k] = n
	}
	return out
}

// replayStack is the API on a database with a dispatcher and a worker on the Temporal dev server
// that delivers to the receiver: one attempt per delivery (no retries), so a failure exhausts it.
type replayStack struct {
	*testEnv
	rr    *replayReceiver
	tc    client.Client
	queue string
}

func newReplayStack(t *testing.T, db *model.DB) *replayStack {
	uniqueIDs(t, db)
	tc := temporaltest.Start(t).Client(t)
	s := &replayStack{rr: newReplayReceiver(t), tc: tc, queue: "replays-" + strings.ReplaceAll(t.Name(), "/", "-")}
	d := &dispatch.Dispatcher{Client: tc, TaskQueue: s.queue, RetryWindow: time.Hour, AttemptTimeout: 5 * time.Second}
	s.testEnv = newEnv(t, db, func(c *envConfig) { c.Temporal, c.Dispatcher = tc, d })
	box, err := secretbox.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(s.rr.Certificate())
	out, err := egress.New(egress.Options{Policy: egress.AddressPolicy{AllowPrivate: true}, RootCAs: roots, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{Client: tc, TaskQueue: s.queue, DB: db.DB, Logger: logger, Dispatcher: d,
			Activities:    &activities.Activities{DB: db, Secrets: box, Egress: out, UserAgent: "webhookd/test", Log: logger, Mailer: nopMailer{}},
			SweepInterval: time.Second, MaxConcurrentDeliveries: 8})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return s
}

// failedFixture registers webhooks of v pointing at the receiver (paths /<variant><i>) and publishes
// events numbered 1..events to them while the receiver fails, then waits until every delivery is
// exhausted. It returns the account's auth, the webhooks' ids and the deliveries' ids.
func (s *replayStack) failedFixture(t *testing.T, v variantCase, webhooks, events int) (func(*http.Request), []int64, []int64) {
	t.Helper()
	ctx := context.Background()
	auth := v.auth(newKey(t, s.db))
	var hooks []int64
	for i := range webhooks {
		id := int64(s.do(t, "POST", v.collection, auth, createBody("https://r.example.com/hook", v.eventType)).data(t)["id"].(float64))
		// The API takes public URLs only; the receiver listens on loopback.
		if _, err := s.db.NewUpdate().Model((*model.Webhook)(nil)).Set("url = ?", fmt.Sprintf("%s/%s%d", s.rr.URL, v.name, i)).
			Where("id = ?", id).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, id)
	}
	for n := 1; n <= events; n++ {
		data := map[string]any{}
		for k, val := range validData[v.name].(map[string]any) {
			data[k] = val
		}
		data[replayKey("/"+v.name)] = n
		s.do(t, "POST", eventsPath(v), auth, eventBody(v, v.eventType, data)).expect(t, http.StatusAccepted, "")
	}
	var ids []int64
	waitUntil(t, "every delivery exhausted", func() bool {
		var ds []model.Delivery
		if err := s.db.NewSelect().Model(&ds).Where("webhook_id IN (?)", bun.List(hooks)).
			Where("event_id NOT IN (SELECT id FROM events WHERE event_type = ?)", model.EventTest).Order("id").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, d := range ds {
			if d.State != model.DeliveryExhausted {
				return false
			}
			ids = append(ids, d.ID)
		}
		return len(ids) == webhooks*events
	})
	return auth, hooks, ids
}

var idBase atomic.Int64

// uniqueIDs starts the database's ids at a base of their own, as e2e's stacks do: the tests share
// one Temporal namespace, and workflow ids are made of event, webhook and replay ids.
func uniqueIDs(t *testing.T, db *model.DB) {
	t.Helper()
	base := (time.Now().UnixNano()/1e6%1e6)*1e6 + idBase.Add(1)*10_000
	for _, table := range []string{"webhooks", "events", "deliveries", "replays"} {
		var err error
		if db.Dialect().Name() == dialect.PG {
			_, err = db.ExecContext(context.Background(), fmt.Sprintf("ALTER TABLE %s ALTER COLUMN id RESTART WITH %d", table, base))
		} else {
			_, err = db.ExecContext(context.Background(), "DELETE FROM sqlite_sequence WHERE name = ?", table)
			if err == nil {
				_, err = db.ExecContext(context.Background(), "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", table, base)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// nopMailer takes the owner's notices (a failing webhook's) and sends nothing.
type nopMailer struct{}

func (nopMailer) Send(context.Context, activities.Mail) error { return nil }

// waitUntil polls ok until it holds; the test's own deadline bounds it.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 2 minutes for %s", what)
		}
	}
}

// TestReplayByPayloadFilter (issue 46): two webhooks with six failed deliveries each; a replay whose
// payload filter picks three of the events sends exactly those six deliveries, each once, through
// their delivery workflows to a real HTTPS receiver; its dry run matched the same six and sent
// nothing; GET shows its counts; a canceled replay that has ended stays done.
func TestReplayByPayloadFilter(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			s := newReplayStack(t, b.Open(t))
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
					auth, hooks, ids := s.failedFixture(t, v, 2, 6)
					s.rr.takeFromNow()
					prefix := strings.TrimSuffix(v.collection, "/webhooks")
					key := replayKey("/" + v.name)
					body := fmt.Sprintf(`{"since":%q,"filter":{"data":{%q:{"$gte":4}}}%%s}`, since, key)

					dry := s.do(t, "POST", prefix+"/replays", auth, fmt.Sprintf(body, `,"dryRun":true`))
					dry.expect(t, http.StatusOK, "")
					v.okEnvelope(t, dry)
					var want []int64 // the deliveries of events 4, 5 and 6: the last three of each webhook
					for _, id := range ids {
						var d model.Delivery
						if err := s.db.NewSelect().Model(&d).Where("id = ?", id).Scan(context.Background()); err != nil {
							t.Fatal(err)
						}
						var ev model.Event
						if err := s.db.NewSelect().Model(&ev).Where("id = ?", d.EventID).Scan(context.Background()); err != nil {
							t.Fatal(err)
						}
						var data map[string]any
						_ = json.Unmarshal([]byte(ev.Data), &data)
						if data[key].(float64) >= 4 {
							want = append(want, id)
						}
					}
					if got := listOf(dry.data(t)["firstIds"]); dry.data(t)["matched"] != float64(6) || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("dry run = %s, want matched 6, ids %v", dry.raw, want)
					}
					if n := len(s.rr.counts()); n != 0 {
						t.Fatalf("the dry run sent %v", s.rr.counts())
					}

					r := s.do(t, "POST", prefix+"/replays", auth, fmt.Sprintf(body, ""))
					r.expect(t, http.StatusAccepted, "")
					v.okEnvelope(t, r)
					if r.data(t)["matched"] != float64(6) || r.data(t)["state"] != "running" {
						t.Fatalf("replay = %s, want 6 matched, running", r.raw)
					}
					path := fmt.Sprintf("%s/replays/%.0f", prefix, r.data(t)["id"])
					var got response
					waitUntil(t, "the replay done", func() bool {
						got = s.do(t, "GET", path, auth, "")
						got.expect(t, http.StatusOK, "")
						return got.data(t)["state"] == "done"
					})
					if d := got.data(t); d["sent"] != float64(6) || d["skipped"] != float64(0) || d["remaining"] != float64(0) || d["finishedAt"] == nil {
						t.Fatalf("replay = %s, want 6 sent, none skipped or remaining", got.raw)
					}
					waitUntil(t, "the six delivered", func() bool {
						for _, id := range want {
							if deliveryState(t, s.testEnv, id) != model.DeliveryDelivered {
								return false
							}
						}
						return true
					})
					// Every delivery is ended: nothing more can reach the receiver.
					wantTaken := map[string]int{}
					for i := range hooks {
						for n := 4; n <= 6; n++ {
							wantTaken[fmt.Sprintf("/%s%d:%d", v.name, i, n)] = 1
						}
					}
					if taken := s.rr.counts(); fmt.Sprint(taken) != fmt.Sprint(wantTaken) {
						t.Fatalf("the receiver took %v, want %v", taken, wantTaken)
					}
					for _, id := range ids {
						if !slices.Contains(want, id) && deliveryState(t, s.testEnv, id) != model.DeliveryExhausted {
							t.Fatalf("delivery %d, which the filter refused, is %s", id, deliveryState(t, s.testEnv, id))
						}
					}
					// The audit log records the replay once (GET <prefix>/audit-log).
					entries := s.do(t, "GET", prefix+"/audit-log", auth, "")
					entries.expect(t, http.StatusOK, "")
					created := 0
					for _, it := range entries.list(t) {
						if it.(map[string]any)["action"] == "replay.create" {
							created++
						}
					}
					if created != 1 {
						t.Fatalf("%d replay.create entries in %s", created, entries.raw)
					}
					// The replay ended: DELETE answers it as it is; another account finds none.
					del := s.do(t, "DELETE", path, auth, "")
					del.expect(t, http.StatusOK, "")
					if del.data(t)["state"] != "done" || del.data(t)["sent"] != float64(6) {
						t.Fatalf("DELETE of a done replay = %s", del.raw)
					}
					other := v.auth(newKey(t, s.db))
					s.do(t, "GET", path, other, "").expectError(t, v, http.StatusNotFound, "")
					s.do(t, "DELETE", path, other, "").expectError(t, v, http.StatusNotFound, "")
					s.rr.reset()
				})
			}
		})
	}
}

func (rr *replayReceiver) reset() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.take, rr.taken = false, map[string]int{}
}

func listOf(v any) []int64 {
	var out []int64
	for _, x := range v.([]any) {
		out = append(out, int64(x.(float64)))
	}
	return out
}

// TestReplayCancelStopsTheRest (issue 46, PostgreSQL): a replay canceled while its activity waits
// on its third delivery (the test holds that row locked) sends nothing more: the two it had sent
// stay sent, the rest stay exhausted, and its counts say so.
func TestReplayCancelStopsTheRest(t *testing.T) {
	db := dbtest.Postgres(t)
	s := newReplayStack(t, db)
	v := variants[0]
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	auth, _, ids := s.failedFixture(t, v, 1, 6)
	s.rr.takeFromNow()
	ctx := context.Background()

	// Hold the third delivery's row: the replay's claim of it waits.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM deliveries WHERE id = ? FOR UPDATE", ids[2]); err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimSuffix(v.collection, "/webhooks")
	r := s.do(t, "POST", prefix+"/replays", auth, fmt.Sprintf(`{"since":%q}`, since))
	r.expect(t, http.StatusAccepted, "")
	path := fmt.Sprintf("%s/replays/%.0f", prefix, r.data(t)["id"])
	waitUntil(t, "two sent", func() bool { return s.do(t, "GET", path, auth, "").data(t)["sent"] == float64(2) })

	del := s.do(t, "DELETE", path, auth, "")
	del.expect(t, http.StatusOK, "")
	v.okEnvelope(t, del)
	if d := del.data(t); d["state"] != "canceled" || d["sent"] != float64(2) || d["remaining"] != float64(4) || d["finishedAt"] == nil {
		t.Fatalf("canceled replay = %s, want 2 sent and 4 remaining", del.raw)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The workflow ends canceled; its activity, let through, records nothing more.
	run := s.tc.GetWorkflow(ctx, workflows.ReplayWorkflowID(int64(r.data(t)["id"].(float64))), "")
	if err := run.Get(ctx, nil); err == nil {
		t.Fatal("the canceled replay's workflow completed")
	}
	waitUntil(t, "the two delivered", func() bool {
		return deliveryState(t, s.testEnv, ids[0]) == model.DeliveryDelivered && deliveryState(t, s.testEnv, ids[1]) == model.DeliveryDelivered
	})
	for _, id := range ids[2:] {
		if got := deliveryState(t, s.testEnv, id); got != model.DeliveryExhausted {
			t.Fatalf("delivery %d is %s after the cancel, want exhausted", id, got)
		}
	}
	if got := s.do(t, "GET", path, auth, "").data(t); got["state"] != "canceled" || got["sent"] != float64(2) || got["skipped"] != float64(0) {
		t.Fatalf("replay after the cancel = %v", got)
	}
	if taken := s.rr.counts(); len(taken) != 2 {
		t.Fatalf("the receiver took %v, want the first two", taken)
	}
}

// TestReplaysRunningPerAccount (issue 46): an account with 2 replays running in a variant is
// refused a third with 409 conflict, and nothing is stored; a dry run is still answered, and
// another account is not held by them.
func TestReplaysRunningPerAccount(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newReplayStack(t, db)
	ctx := context.Background()
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			key, busy, err := model.CreateAPIKey(ctx, db, "replays-busy-"+v.name+"@example.com", "")
			if err != nil {
				t.Fatal(err)
			}
			variant := model.VariantA
			if v.name == "B" {
				variant = model.VariantB
			}
			for range webhooks.MaxRunningReplays {
				// Running, with no workflow: what an account's long replays look like to the count.
				if err := model.CreateReplay(ctx, db, &model.Replay{AccountID: busy.ID, Variant: variant, Criteria: `{}`}, nil, webhooks.MaxRunningReplays); err != nil {
					t.Fatal(err)
				}
			}
			prefix := strings.TrimSuffix(v.collection, "/webhooks")
			since := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339Nano)
			r := s.do(t, "POST", prefix+"/replays", v.auth(key), fmt.Sprintf(`{"since":%q}`, since))
			r.expect(t, http.StatusConflict, "conflict")
			v.errEnvelope(t, r)
			if n, err := db.NewSelect().Model((*model.Replay)(nil)).Where("account_id = ?", busy.ID).Count(ctx); err != nil || n != webhooks.MaxRunningReplays {
				t.Fatalf("%d replays stored after the refusal (%v), want %d", n, err, webhooks.MaxRunningReplays)
			}
			s.do(t, "POST", prefix+"/replays", v.auth(key), fmt.Sprintf(`{"since":%q,"dryRun":true}`, since)).expect(t, http.StatusOK, "")
			s.do(t, "POST", prefix+"/replays", v.auth(newKey(t, db)), fmt.Sprintf(`{"since":%q}`, since)).expect(t, http.StatusAccepted, "")
		})
	}
}
