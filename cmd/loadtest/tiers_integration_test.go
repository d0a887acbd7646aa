//go:build integration

package main

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/webhookd/webhookd/internal/temporaltest"
)

// TestReferenceTiersDeliverEveryPost runs the raw and bare-Temporal tiers on a few deliveries
// against a real Temporal dev server: each tier waits for every POST at its receiver, so a tier
// that lost one would time out here instead of printing a rate.
func TestReferenceTiersDeliverEveryPost(t *testing.T) {
	cert, _ := testCert(t)
	cfg := config{events: 20, concurrency: 4, timeout: time.Minute, progress: time.Second}
	raw, err := rawTier(t.Context(), cfg, cert)
	if err != nil {
		t.Fatalf("raw tier: %v", err)
	}
	srv := temporaltest.Start(t)
	opts := client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		Logger: temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	var results []tierResult
	for _, local := range []bool{false, true} {
		bare, err := bareTemporalTier(t.Context(), cfg, cert, opts, local)
		if err != nil {
			t.Fatalf("bare Temporal tier (local %v): %v", local, err)
		}
		results = append(results, bare)
	}
	for _, r := range append(results, raw) {
		if r.n != cfg.events || r.elapsed <= 0 {
			t.Errorf("%s: %d deliveries in %s", r.name, r.n, r.elapsed)
		}
	}
}
