//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
	"github.com/webhookd/webhookd/model"
)

// TestNoisyNeighbourSettingsAndReads is the correctness side of two rows of issue 40's
// noisy-neighbour matrix (docs/performance-history.md) on the real stack, beside the rows other
// system tests hold (TestSharedHostIsolation, TestSharedHostBurstIsolation):
//   - settings: account C's webhook reaches a host that requires a client certificate with its
//     own TLS settings; account B's webhooks on the same host have none, and fail their handshakes
//     until their breakers open. Those failures depend on B's settings, so they never open the
//     host's breaker: every delivery of C's arrives, with no failed attempt. Before the fix the
//     matrix saw C's 10 events refused as circuit_open for good (and TestTLSFailuresNeverOpenTheHost
//     failed on the same judgement).
//   - reads: six readers of B's page through its webhooks, deliveries and event log, 200 rows a
//     page, as fast as they can; C's deliveries arrive meanwhile, with no failed attempt.
//
// The bound on C's receipts is generous (a whole attempt timeout): the matrix measures how much
// slower C is; this test says whether anything of B's failed or held C's deliveries.
func TestNoisyNeighbourSettingsAndReads(t *testing.T) {
	const timeout = 5 * time.Second
	st := newStack(t, stackOptions{allowPrivate: true, timeout: timeout, schedule: []time.Duration{10 * time.Minute},
		breakerFailures: 2, breakerCooldown: 10 * time.Minute})
	noisyKey, _, err := model.CreateAPIKey(context.Background(), st.db, "noisy@example.com", "noisy")
	if err != nil {
		t.Fatal(err)
	}
	noisy := st.as(noisyKey)

	t.Run("settings", func(t *testing.T) {
		now := time.Now()
		serverCA := egresstest.NewCA(t, "e2e noisy Receiver CA", now.Add(-time.Hour), now.Add(24*time.Hour))
		clientCA := egresstest.NewCA(t, "e2e noisy Client CA", now.Add(-time.Hour), now.Add(24*time.Hour))
		client := clientCA.Client(t, "webhookd-e2e", now.Add(-time.Hour), now.Add(24*time.Hour))
		var served atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCA.Server(t).TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool()}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // B's refused handshakes are the test
		srv.StartTLS()
		t.Cleanup(srv.Close)

		create := func(s *stack, path string, withTLS bool) int64 {
			body := map[string]any{"url": srv.URL + path, "eventType": "campaign.created"}
			if withTLS {
				body["tls"] = map[string]any{"caCert": serverCA.CertPEM, "clientCert": client.CertPEM, "clientKey": client.KeyPEM}
			}
			status, resp, _ := s.call(t, "A", "POST", collection("A")+"/webhooks", body)
			if status != http.StatusCreated {
				t.Fatalf("create %s: %d %v", path, status, resp)
			}
			return int64(resp["data"].(map[string]any)["id"].(float64))
		}
		healthy := create(st, "/c", true)
		var noisyHooks []int64
		for i := range 5 {
			noisyHooks = append(noisyHooks, create(noisy, fmt.Sprintf("/b/%d", i), false))
		}
		// B's events, until each of its webhooks has failed its handshakes often enough to open a
		// breaker (2 in a row): 3 events, 15 failed attempts.
		for range 3 {
			noisy.publish(t, "A", "campaign.created", campaign)
		}
		eventually(t, time.Minute, "B's handshakes failed twice on each of its webhooks", func() bool {
			for _, id := range noisyHooks {
				log, err := st.attempts(id)
				if err != nil || len(log) < 2 {
					return false
				}
			}
			return true
		})
		var events []int64
		for range 5 {
			noisy.publish(t, "A", "campaign.created", campaign) // B keeps failing meanwhile
			e := st.publish(t, "A", "campaign.created", campaign)
			events = append(events, e)
		}
		for _, e := range events {
			st.waitIdle(t, e, healthy, model.DeliveryDelivered)
		}
		if log := st.checkNoFailedAttempt(t, healthy); len(log) != len(events) {
			t.Errorf("C's webhook: %d attempts for %d deliveries, want one each", len(log), len(events))
		}
		if n := served.Load(); n != int32(len(events)) {
			t.Errorf("the receiver served %d requests, want C's %d", n, len(events))
		}
		// The host goes with this subtest: C's webhook there goes too.
		if status, resp, _ := st.call(t, "A", "DELETE", fmt.Sprintf("%s/webhooks/%d", collection("A"), healthy), nil); status != http.StatusOK {
			t.Fatalf("delete C's webhook: %d %v", status, resp)
		}
	})

	t.Run("reads", func(t *testing.T) {
		healthy, _ := st.createWebhook(t, "A", st.rc.url("/reads"), "campaign.created")
		// B's data: 90 more webhooks (95 of its 100) and 300 events, so that its lists run to a page
		// or two of 200.
		for i := range 90 {
			noisy.createWebhook(t, "A", fmt.Sprintf("https://127.0.0.1:1/reads/%d", i), "campaign.completed")
		}
		for range 300 {
			noisy.publish(t, "A", "campaign.failed", campaign)
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var pages atomic.Int64
		for i := range 6 {
			path := []string{"/webhooks?limit=200", "/events?limit=200"}[i%2]
			wg.Go(func() {
				for ctx.Err() == nil {
					status, _, _ := noisy.call(t, "A", "GET", collection("A")+path, nil)
					if status != http.StatusOK && status != http.StatusTooManyRequests {
						t.Errorf("B's read of %s: %d", path, status)
						return
					}
					pages.Add(1)
				}
			})
		}
		var events []int64
		var worst time.Duration
		for range 5 {
			e, d := st.receipt(t, "/reads", healthy)
			events = append(events, e)
			worst = max(worst, d)
		}
		stop()
		wg.Wait()
		t.Logf("C's worst event-to-receipt beside B's readers: %v (%d pages read by B)", worst, pages.Load())
		if worst >= timeout {
			t.Errorf("C's delivery took %v beside B's readers, as long as a whole attempt timeout (%v)", worst, timeout)
		}
		if log := st.checkNoFailedAttempt(t, healthy); len(log) != len(events) {
			t.Errorf("C's webhook: %d attempts for %d deliveries, want one each", len(log), len(events))
		}
	})
}
