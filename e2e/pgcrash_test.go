//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
)

// TestPostgresKill9UnderLoadLosesNothing (issue 33): webhookd, the real binary running the API and
// the worker, on a PostgreSQL server of its own that runs durable as production's should
// (synchronous_commit on). Four publishers publish while the postmaster is killed with SIGKILL and
// started again 3 s later on the same data. Every event answered 202 is delivered to each of its
// three webhooks, and an event that reaches a webhook twice does so under one webhook-id: a 202
// is only written once PostgreSQL has made the commit durable, so its crash loses none of them.
func TestPostgresKill9UnderLoadLosesNothing(t *testing.T) {
	besideOthers(t)
	bin := webhookdBinary(t)
	pg := dbtest.CrashablePostgres(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	p, apiURL := startWebhookd(t, bin, pg.URL, "pgkill", tsrv, rc,
		"WEBHOOKD_RETRY_SCHEDULE=1s,2s,5s",
		"WEBHOOKD_SWEEP_INTERVAL=500ms",
		"WEBHOOKD_RATE_LIMIT=10000",
		"WEBHOOKD_LOG_LEVEL=warn",
	)

	db := openTestDB(t, pg.URL)
	var setting string
	if err := db.NewRaw("SHOW synchronous_commit").Scan(context.Background(), &setting); err != nil || setting != "on" {
		t.Fatalf("synchronous_commit = %q (%v), want on: the test would prove nothing", setting, err)
	}
	key, _, err := model.CreateAPIKey(context.Background(), db, "pgkill@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{apiURL: apiURL, key: key, db: db, rc: rc}
	paths := []string{"/pg-0", "/pg-1", "/pg-2"}
	hooks := make([]int64, len(paths))
	for i, path := range paths {
		hooks[i], _ = st.createWebhook(t, "A", rc.url(path), "campaign.created")
	}

	body, _ := json.Marshal(map[string]any{"eventType": "campaign.created", "data": campaign})
	var (
		mu       sync.Mutex
		accepted []int64
		refused  = map[string]int{}
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", st.apiURL+"/api/svc/v2/events", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", key)
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					refused["no answer"]++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var out struct {
					Data struct {
						ID int64 `json:"id"`
					} `json:"data"`
				}
				decodeErr := json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == http.StatusAccepted && decodeErr == nil && out.Data.ID > 0 {
					accepted = append(accepted, out.Data.ID)
				} else {
					refused[fmt.Sprint(resp.StatusCode)]++
				}
				mu.Unlock()
				if resp.StatusCode != http.StatusAccepted {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	acceptedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	time.Sleep(3 * time.Second)
	before := acceptedNow()
	t.Logf("kill -9 of the postmaster after %d accepted events", before)
	pg.Kill(t)
	time.Sleep(3 * time.Second)
	pg.Start(t)
	t.Log("PostgreSQL started again on the same data")
	// Publishing goes on until webhookd accepts again, and a while longer.
	eventually(t, time.Minute, "publishing accepted again after the restart", func() bool { return acceptedNow() > before+20 })
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	ids := slices.Clone(accepted)
	t.Logf("%d events answered 202, refused while PostgreSQL was down: %v", len(ids), refused)
	mu.Unlock()
	if len(refused) == 0 {
		t.Fatal("no publish was refused: the kill did not land during the load, and the test proves nothing")
	}

	// Every accepted event reaches every webhook; a second arrival carries the same webhook-id.
	want := map[string]bool{}
	for _, id := range ids {
		for _, h := range hooks {
			want[wire.MessageID(id, h)] = true
		}
	}
	var missing []string
	delivered := func() bool {
		got := map[string]bool{}
		for i, path := range paths {
			for _, r := range rc.requests(path) {
				var parsed struct {
					EventType string `json:"eventType"`
				}
				if json.Unmarshal(r.Body, &parsed) != nil || parsed.EventType != "campaign.created" {
					continue
				}
				id := r.Header.Get(wire.HeaderID)
				if !strings.HasSuffix(id, fmt.Sprintf("_%d", hooks[i])) {
					t.Fatalf("%s got webhook-id %q, not one of webhook %d", path, id, hooks[i])
				}
				got[id] = true
			}
		}
		missing = missing[:0]
		for id := range want {
			if !got[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}
	for deadline := time.Now().Add(3 * time.Minute); !delivered(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			slices.Sort(missing)
			t.Fatalf("%d of %d deliveries of events answered 202 never arrived, e.g. %v\n%s", len(missing), len(want), missing[:min(len(missing), 10)], p.logs(t))
		}
	}
	dup := 0
	for _, path := range paths {
		seen := map[string]int{}
		for _, r := range rc.requests(path) {
			seen[r.Header.Get(wire.HeaderID)]++
		}
		for _, n := range seen {
			if n > 1 {
				dup++
			}
		}
	}
	t.Logf("%d deliveries of %d accepted events arrived, %d of them more than once (each under its one webhook-id)", len(want), len(ids), dup)
}
