//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
)

// replayKillBatchOf is how many failed deliveries TestReplaySurvivesKill replays (issue 46): 2,000,
// or REPLAY_E2E_BATCH (10000 measures the acceptance's 10,000-delivery replay).
func replayKillBatchOf(t *testing.T) int {
	if s := os.Getenv("REPLAY_E2E_BATCH"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("REPLAY_E2E_BATCH=%q: want an integer of at least 2", s)
		}
		return n
	}
	return 2000
}

// processMemory is a process's resident set now and at its peak (VmRSS, VmHWM), from /proc.
func processMemory(t *testing.T, pid int) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown: " + err.Error()
	}
	var out []string
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "VmHWM:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

// TestReplaySurvivesKill (issue 46): the built webhookd binary on a Temporal dev server and
// PostgreSQL; replayKillBatch deliveries of one webhook, disabled while they are published, are
// held exhausted. A replay of them is asked for, and webhookd is killed with SIGKILL once half of them
// have been claimed. After a restart the replay resumes where its progress stopped and ends done
// with every delivery sent once by it (sent = matched, none skipped: a delivery the replay had
// claimed before the kill is never claimed again, or its claim would have failed and counted as
// skipped); every delivery ends delivered and the receiver got each message, a second copy only
// under the same webhook-id and only of a delivery whose attempt the kill cut (in flight then):
//
//	go test -count=1 -run TestReplaySurvivesKill -tags e2e -v ./e2e/
//
// It runs alone, not beside the other system tests (besideOthers): beside them under -race, CI
// twice saw the replay not done 5 minutes after the restart (on 9562b5a and 40f77d2) where it
// takes about 30 s alone. It is slow there, not stuck: the replay hands its deliveries over one at
// a time (dispatch.Activities.ReplayDeliveries), and beside 7 other system tests at -parallel 3
// (2026-12-07, two cores) it handed over 7-10 a second, against about 66 alone: the first half
// took 1m44s, and the second went on at the same pace until the others ended. The wait below
// says what was left.
func TestReplaySurvivesKill(t *testing.T) {
	replayKillBatch := replayKillBatchOf(t)
	wait := time.Duration(max(1, replayKillBatch/2000)) * 5 * time.Minute
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	db := openTestDB(t, dbURL)
	p, apiURL := startWebhookd(t, bin, dbURL, "replay-kill", tsrv, rc, append(killSettings, "WEBHOOKD_RETRY_SCHEDULE=100ms")...)
	st := &stack{apiURL: apiURL, db: db, rc: rc}
	var err error
	if st.key, _, err = model.CreateAPIKey(context.Background(), db, "replay-kill@example.com", ""); err != nil {
		t.Fatal(err)
	}
	since := model.Now()
	path := "/replay-kill"
	hook, _ := st.createWebhook(t, "A", rc.url(path), "campaign.created")
	// Disabled while the events are published, each delivery is held as exhausted without an
	// attempt on the network (docs/api.md, "Disabling a webhook"): the replay's failed deliveries,
	// made in seconds rather than by two failed attempts each. The replay enables the webhook, as
	// any manual retry does.
	if status, body, _ := st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/disable", hook), nil); status != http.StatusOK {
		t.Fatalf("disable: %d %v", status, body)
	}
	events, err := publishMany(st, replayKillBatch)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "every delivery exhausted", func() bool {
		return countStates(t, db, hook)[model.DeliveryExhausted] == replayKillBatch
	})
	if n := len(rc.requests(path)); n != 0 {
		t.Fatalf("the disabled webhook's receiver got %d requests before the replay", n)
	}
	fixedAt := time.Now()

	status, body, _ := st.call(t, "A", "POST", "/api/svc/v2/replays", map[string]any{"since": since.Format(time.RFC3339Nano), "webhookIds": []int64{hook}})
	if status != http.StatusAccepted {
		t.Fatalf("replay: %d %v", status, body)
	}
	data := body["data"].(map[string]any)
	if data["matched"] != float64(replayKillBatch) {
		t.Fatalf("replay: %v, want %d matched", body, replayKillBatch)
	}
	replayPath := fmt.Sprintf("/api/svc/v2/replays/%.0f", data["id"])
	claimed := func() int { return replayKillBatch - countStates(t, db, hook)[model.DeliveryExhausted] }
	for deadline := time.Now().Add(wait); claimed() < replayKillBatch/2; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replay claimed %d of %d within %s\n%s", claimed(), replayKillBatch, wait, p.logs(t))
		}
	}
	p.kill(t)
	atKill := countStates(t, db, hook)
	t.Logf("killed with %d claimed: %v", claimed(), atKill)

	p.start(t)
	restarted := time.Now()
	var final map[string]any
	for deadline := time.Now().Add(wait); ; time.Sleep(50 * time.Millisecond) {
		_, got, _ := st.call(t, "A", "GET", replayPath, nil)
		final, _ = got["data"].(map[string]any)
		states, claims := countStates(t, db, hook), countClaims(t, db, hook)
		if final["state"] == "done" && states[model.DeliveryDelivered] == replayKillBatch && claims == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the restart: the replay %v, deliveries %v, %d claimed\n%s", wait, final, states, claims, p.logs(t))
		}
	}
	t.Logf("done %s after the restart: %v", time.Since(restarted).Round(time.Millisecond), final)
	// The restarted process ran the second half of the replay and nothing else.
	t.Logf("memory of the restarted webhookd after the replay: %s", processMemory(t, p.cmd.Process.Pid))
	if final["sent"] != float64(replayKillBatch) || final["skipped"] != float64(0) || final["remaining"] != float64(0) {
		t.Errorf("replay after the kill = %v, want %d sent, none skipped", final, replayKillBatch)
	}
	want := make(map[string]bool, len(events))
	for _, ev := range events {
		want[wire.MessageID(ev, hook)] = true
	}
	got := map[string]int{}
	for _, r := range rc.requests(path) {
		if r.At.Before(fixedAt) {
			continue
		}
		id := r.Header.Get("Webhook-Id")
		if !want[id] {
			t.Errorf("a receipt under webhook-id %q, which is none of the replay's", id)
		}
		got[id]++
	}
	duplicates := 0
	for _, n := range got {
		duplicates += n - 1
	}
	t.Logf("received %d messages, %d duplicates; %d deliveries were delivering at the kill", len(got), duplicates, atKill[model.DeliveryDelivering])
	if len(got) != replayKillBatch {
		t.Errorf("%d of %d messages received after the fix\n%s", len(got), replayKillBatch, p.logs(t))
	}
	if duplicates > atKill[model.DeliveryDelivering] {
		t.Errorf("%d duplicates, more than the %d deliveries in flight at the kill", duplicates, atKill[model.DeliveryDelivering])
	}
}
