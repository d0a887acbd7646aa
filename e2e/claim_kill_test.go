//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
)

// killBatch is how many exhausted deliveries each kill point retries: three batches of the
// activity (100 each), as issue 18 reported it.
const killBatch = 300

// TestBatchRetryAndRecoverySurviveKill is issue 18's experiment on the real stack: the built
// webhookd binary (API and worker in one process) on a Temporal dev server and PostgreSQL, a
// receiver that fails until killBatch deliveries of one webhook are exhausted and is then fixed.
// A webhook-wide retry, then a recovery since T, is asked for, and webhookd is killed with SIGKILL
// at three points of the batch, chosen by polling how many deliveries left exhausted: before the
// first signal, in the middle, and near the end. After a restart every delivery ends delivered,
// the receiver got a second copy only under the same webhook-id, and none is left delivering or
// claimed. The counts of each kill point are logged:
//
//	go test -count=1 -run TestBatchRetryAndRecoverySurviveKill -tags e2e -v ./e2e/
func TestBatchRetryAndRecoverySurviveKill(t *testing.T) {
	besideOthers(t)
	// Kill points: how many deliveries of each batch have left exhausted (been claimed) when
	// webhookd is killed. Each is a stack of its own (webhookd, its database, its receiver) on the
	// shared Temporal server, so the three run beside each other and beside other tests.
	for _, at := range []int{0, killBatch / 2, killBatch - 10} {
		t.Run(fmt.Sprintf("kill-at-%d", at), func(t *testing.T) {
			besideOthers(t)
			killBatchAt(t, at)
		})
	}
}

// killBatchAt is one kill point of TestBatchRetryAndRecoverySurviveKill: webhookd is killed once
// at deliveries of each batch have been claimed (0: at once).
func killBatchAt(t *testing.T, at int) {
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	var failing atomic.Bool
	rc.setRespond(func(_ int, _ string, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	db := openTestDB(t, dbURL)
	// Two attempts 100 ms apart exhaust a delivery.
	p, apiURL := startWebhookd(t, bin, dbURL, "kill", tsrv, rc, append(killSettings, "WEBHOOKD_RETRY_SCHEDULE=100ms")...)
	st := &stack{apiURL: apiURL, db: db, rc: rc}

	// A retry and a recovery, on webhooks of two accounts, run side by side.
	cases := []*killCase{{op: "retry"}, {op: "recover"}}
	failing.Store(true)
	var wg sync.WaitGroup
	for _, c := range cases {
		c.name, c.path = fmt.Sprintf("%s/kill-at-%d", c.op, at), fmt.Sprintf("/%s-%d", c.op, at)
		// An account of its own: its events reach this case's webhook alone.
		c.st = *st
		var err error
		if c.st.key, _, err = model.CreateAPIKey(context.Background(), db, fmt.Sprintf("%s-%d@example.com", c.op, at), ""); err != nil {
			t.Fatal(err)
		}
		c.since = model.Now()
		c.hook, _ = c.st.createWebhook(t, "A", rc.url(c.path), "campaign.created")
		wg.Go(func() { c.events, c.err = publishMany(&c.st, killBatch) })
	}
	wg.Wait()
	for _, c := range cases {
		if c.err != nil {
			t.Fatal(c.err)
		}
		// Setup, not the subject: 600 deliveries of two attempts each take 6-7 s on an idle
		// 2-core machine, and over a minute under the load of other tests.
		eventually(t, 3*time.Minute, c.name+": every delivery exhausted", func() bool {
			return countStates(t, db, c.hook)[model.DeliveryExhausted] == killBatch
		})
	}
	failing.Store(false)
	fixedAt := time.Now()

	for _, c := range cases {
		var status int
		var body map[string]any
		if c.op == "retry" {
			status, body, _ = c.st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/retry", c.hook), nil)
		} else {
			status, body, _ = c.st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/recover", c.hook),
				map[string]string{"since": c.since.Format(time.RFC3339Nano)})
		}
		if status != http.StatusAccepted {
			t.Fatalf("%s: %d %v", c.name, status, body)
		}
		c.accepted = acceptedCount(body)
		if c.op == "retry" && (c.accepted != killBatch || body["data"].(map[string]any)["workflowId"] == nil) {
			t.Fatalf("%s: answer %v, want retried %d and a workflowId", c.name, body, killBatch)
		}
	}
	// Kill when one of the batches has claimed `at` deliveries (at 0: at once), the other close behind.
	claimed := func(c *killCase) int { return killBatch - countStates(t, db, c.hook)[model.DeliveryExhausted] }
	for at > 0 && claimed(cases[0]) < at && claimed(cases[1]) < at {
		time.Sleep(2 * time.Millisecond)
	}
	p.kill(t)
	for _, c := range cases {
		c.claimedAtKill, c.heldAtKill = claimed(c), countClaims(t, db, c.hook)
	}

	p.start(t)
	restarted := time.Now()
	for _, c := range cases {
		// Within 3 minutes, as the setup above: a Deliver activity cut by the kill runs again
		// after its start-to-close timeout (12 s), but the test runs beside others
		// (besideOthers), and 600 deliveries took over 90 s beside make cluster's stack on a
		// loaded machine.
		eventually(t, 3*time.Minute, c.name+": every delivery delivered", func() bool {
			return countStates(t, db, c.hook)[model.DeliveryDelivered] == killBatch && countClaims(t, db, c.hook) == 0
		})
	}
	repaired := p.metric(t, `webhookd_delivery_starts_total{by="repair"}`)
	t.Logf("kill at %d: all delivered %s after the restart; the sweeper repaired %.0f claims", at, time.Since(restarted).Round(time.Millisecond), repaired)
	for _, c := range cases {
		final := countStates(t, db, c.hook)
		stranded := final[model.DeliveryDelivering]
		// Receipts after the fix: each a copy of one of the batch's messages, under its own
		// webhook-id; a duplicate is a second copy of one.
		want := make(map[string]bool, len(c.events))
		for _, ev := range c.events {
			want[wire.MessageID(ev, c.hook)] = true
		}
		got := map[string]int{}
		for _, r := range rc.requests(c.path) {
			if r.At.Before(fixedAt) {
				continue
			}
			id := r.Header.Get("Webhook-Id")
			if !want[id] {
				t.Errorf("%s: a receipt under webhook-id %q, which is none of the batch's", c.name, id)
			}
			got[id]++
		}
		duplicates := 0
		for _, n := range got {
			duplicates += n - 1
		}
		t.Logf("%s: accepted %d, claimed at the kill %d (%d of them held by a claim), delivered %d, stranded %d, duplicates %d",
			c.name, c.accepted, c.claimedAtKill, c.heldAtKill, final[model.DeliveryDelivered], stranded, duplicates)
		if len(got) != killBatch || stranded != 0 || final[model.DeliveryDelivered] != killBatch {
			t.Errorf("%s: %d of %d messages received after the fix, %d stranded, states %v\n%s", c.name, len(got), killBatch, stranded, final, p.logs(t))
		}
	}
}

// killCase is one batch of TestBatchRetryAndRecoverySurviveKill: a retry or a recovery of
// killBatch exhausted deliveries of one webhook.
type killCase struct {
	op, name, path string
	st             stack
	since          time.Time
	hook           int64
	events         []int64
	err            error
	accepted       int
	claimedAtKill  int
	heldAtKill     int
}

// startWebhookd starts bin as `webhookd serve` on the test's own stack (webhookdEnv, then extra)
// at an address of its own, killed when the test ends, and returns it with its API's URL.
func startWebhookd(t *testing.T, bin, dbURL, queue string, tsrv *temporaltest.Server, rc *receiver, extra ...string) (*webhookdProcess, string) {
	t.Helper()
	apiAddr := freeAddr(t)
	p := &webhookdProcess{bin: bin, logFile: filepath.Join(t.TempDir(), "webhookd.log"), env: webhookdEnv(t, dbURL, apiAddr, queue, tsrv, rc, extra...),
		healthz: "http://" + apiAddr + "/healthz"}
	p.start(t)
	t.Cleanup(func() { p.kill(t) })
	return p, "http://" + apiAddr
}

// killSettings are what the kill tests run webhookd with: a Deliver activity cut by the kill runs
// again after its start-to-close timeout (2 x 1 s + 10 s); the sweeper repairs a claim after 6
// intervals (1.5 s); and neither the key's rate limit nor the host's or endpoint's slots hold
// their bursts back.
var killSettings = []string{
	"WEBHOOKD_DELIVERY_TIMEOUT=1s",
	"WEBHOOKD_SWEEP_INTERVAL=250ms",
	"WEBHOOKD_RATE_LIMIT=10000",
	"WEBHOOKD_HOST_CONCURRENCY=64",
	"WEBHOOKD_ENDPOINT_CONCURRENCY=64",
	"WEBHOOKD_LOG_LEVEL=warn",
}

// webhookdProcess runs the built binary as `webhookd serve` (API and worker), to be killed with
// SIGKILL and started again on the same database and Temporal.
// webhookdEnv is the environment of a webhookd process on the test's own stack: its database,
// Temporal server (a task queue of its own, named after queue), receiver's CA and data directory,
// no retry jitter, then extra.
func webhookdEnv(t *testing.T, dbURL, apiAddr, queue string, tsrv *temporaltest.Server, rc *receiver, extra ...string) []string {
	return append(append(os.Environ(),
		"WEBHOOKD_DATABASE_URL="+dbURL,
		"WEBHOOKD_HTTP_ADDR="+apiAddr,
		"TEMPORAL_ADDRESS="+tsrv.Address,
		"TEMPORAL_NAMESPACE="+tsrv.Namespace,
		fmt.Sprintf("WEBHOOKD_TASK_QUEUE=%s-%d", queue, time.Now().UnixNano()),
		"WEBHOOKD_SECRET_KEY="+base64.StdEncoding.EncodeToString(testSecretKey),
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_EXTRA_CA_FILE="+rc.caFile,
		"WEBHOOKD_DATA_DIR="+t.TempDir(),
		"WEBHOOKD_RETRY_JITTER=0",
	), extra...)
}

type webhookdProcess struct {
	bin, logFile, healthz string
	env                   []string
	cmd                   *exec.Cmd
}

func (p *webhookdProcess) start(t *testing.T) {
	t.Helper()
	logs, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logs.Close() }() // the child holds its own descriptor
	p.cmd = exec.Command(p.bin, "serve")
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "webhookd up", func() bool {
		resp, err := http.Get(p.healthz)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
}

// kill sends SIGKILL, as a crash would, and waits for the process to end.
func (p *webhookdProcess) kill(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	p.cmd = nil
}

// metric reads one series of the running process's /metrics (0 when absent).
func (p *webhookdProcess) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.healthz, "/healthz") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// metricsText is the running process's whole /metrics page.
func (p *webhookdProcess) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.healthz, "/healthz") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (p *webhookdProcess) logs(t *testing.T) string {
	b, err := os.ReadFile(p.logFile)
	if err != nil {
		return err.Error()
	}
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// publishMany publishes n events of campaign.created through the API, eight requests at a time,
// and returns their ids.
func publishMany(st *stack, n int) ([]int64, error) {
	body, _ := json.Marshal(map[string]any{"eventType": "campaign.created", "data": campaign})
	ids := make([]int64, n)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				req, _ := http.NewRequest("POST", st.apiURL+"/api/svc/v2/events", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", st.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				var out struct {
					Data struct {
						ID int64 `json:"id"`
					} `json:"data"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("publish: %d, %v", resp.StatusCode, err)
					return
				}
				ids[i] = out.Data.ID
			}
		})
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// acceptedCount is the count a retry (retried) or a recovery (queued) answered with.
func acceptedCount(body map[string]any) int {
	data, _ := body["data"].(map[string]any)
	for _, k := range []string{"retried", "queued"} {
		if n, ok := data[k].(float64); ok {
			return int(n)
		}
	}
	return -1
}

// countStates counts a webhook's deliveries by state.
func countStates(t *testing.T, db *model.DB, webhookID int64) map[string]int {
	t.Helper()
	var rows []struct {
		State string `bun:"state"`
		N     int    `bun:"n"`
	}
	err := db.NewSelect().TableExpr("deliveries").ColumnExpr("state, COUNT(*) AS n").Where("webhook_id = ?", webhookID).
		GroupExpr("state").Scan(context.Background(), &rows)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out
}

// countClaims counts a webhook's deliveries that a retry has claimed and not released.
func countClaims(t *testing.T, db *model.DB, webhookID int64) int {
	t.Helper()
	n, err := db.NewSelect().TableExpr("deliveries").Where("webhook_id = ?", webhookID).Where("claimed_at IS NOT NULL").Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// TestSweeperRepairsStaleClaims: a delivery a crashed retry claimed and never signaled (delivering,
// claimed long ago) is handed to its workflow by the sweeper and delivered, counted under
// by="repair"; a stale claim on a delivery whose workflow has run since (delivered) is only
// cleared, with no resend.
func TestSweeperRepairsStaleClaims(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true, schedule: []time.Duration{100 * time.Millisecond}})
	var failing atomic.Bool
	failing.Store(true)
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	hook, _ := st.createWebhook(t, "A", st.rc.url("/stale"), "campaign.created")
	stranded := st.publish(t, "A", "campaign.created", campaign)
	st.waitIdle(t, stranded, hook, model.DeliveryExhausted)
	failing.Store(false)
	done := st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "second delivered", func() bool { return st.delivery(t, done, hook).State == model.DeliveryDelivered })

	// What a kill between the claim and the signal leaves, an hour ago; and a claim whose
	// delivery was delivered since.
	ctx := context.Background()
	for _, ev := range []int64{stranded, done} {
		d := st.delivery(t, ev, hook)
		from := []string{model.DeliveryExhausted, model.DeliveryDelivered}
		if _, ok, err := model.ClaimDelivery(ctx, st.db, d.ID, from); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := st.db.NewUpdate().Model((*model.Delivery)(nil)).Set("claimed_at = ?", model.Now().Add(-time.Hour)).Where("id = ?", d.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := dbtest.SetDeliveryState(ctx, st.db, st.delivery(t, done, hook).ID, model.DeliveryDelivered); err != nil {
		t.Fatal(err)
	}
	receipts := len(st.rc.requests("/stale"))

	eventually(t, 30*time.Second, "the stranded delivery delivered and both claims cleared", func() bool {
		return st.delivery(t, stranded, hook).State == model.DeliveryDelivered &&
			st.delivery(t, stranded, hook).ClaimedAt == nil && st.delivery(t, done, hook).ClaimedAt == nil
	})
	if got := len(st.rc.requests("/stale")) - receipts; got != 1 {
		t.Fatalf("%d receipts after the repair, want 1 (the stranded delivery; none for the delivered one)", got)
	}
	if got := testutil.ToFloat64(st.starter.Starts.WithLabelValues(string(dispatch.StartedByRepair))); got != 1 {
		t.Fatalf("starts by repair = %v, want 1", got)
	}
}
