//go:build integration

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	temporallog "go.temporal.io/sdk/log"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
)

// TestSuiteRunsOnARealStack runs the suite on a few events against webhookd built from this tree,
// on SQLite and a Temporal dev server: every delivery of every scenario must arrive, and the
// starts metric must account for every delivery workflow. It asserts counts, not timings.
func TestSuiteRunsOnARealStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds webhookd and starts a stack")
	}
	cert, certFile := testCert(t)
	srv := temporaltest.Start(t)
	api, key := startWebhookd(t, srv, certFile)

	cfg := config{api: api, key: key, listen: "127.0.0.1:0", timeout: 2 * time.Minute, progress: time.Second,
		events: 10, concurrency: 4, hooks: dispatch.FanOutThreshold + 4, rate: 5, duration: 2 * time.Second}
	opts := client.Options{HostPort: srv.Address, Namespace: srv.Namespace,
		Logger: temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}

	var table bytes.Buffer
	r, err := suite(t.Context(), cfg, cert, opts, &table)
	t.Logf("suite table:%s", table.String())
	if err != nil {
		t.Fatalf("suite: %v", err)
	}
	if r.tiers == nil || r.open == nil || r.fanOut == nil || r.burst == nil {
		t.Fatalf("a scenario is missing from the result: %+v", r)
	}
	for _, tier := range r.tiers.all() {
		if tier.n != cfg.events || tier.elapsed <= 0 {
			t.Errorf("%s: %d deliveries in %s, want %d", tier.name, tier.n, tier.elapsed, cfg.events)
		}
	}
	wantOpen := int(cfg.rate * cfg.duration.Seconds())
	if o := r.open.s; o.events != wantOpen || o.missing != 0 || o.p50.lowerBound || o.p99.lowerBound || o.max.lowerBound {
		t.Errorf("openloop: %d events (want %d), %d missing, p50 %s p99 %s max %s", o.events, wantOpen, o.missing, o.p50, o.p99, o.max)
	}
	f := r.fanOut
	if f.hooks != cfg.hooks || f.missing != 0 || f.last.lowerBound || f.accepted <= 0 {
		t.Errorf("fanout: %d hooks, %d missing, 202 after %s, last receipt after %s", f.hooks, f.missing, f.accepted, f.last)
	}
	checkStarts(t, "fanout", f.starts, cfg.hooks)
	if f.starts.fanout != cfg.hooks {
		t.Errorf("fanout: %d of %d webhooks started through the fan-out workflow, want all", f.starts.fanout, cfg.hooks)
	}
	if b := r.burst; b.events != cfg.events || b.t.total <= 0 || b.t.published <= 0 {
		t.Errorf("burst: %d events (want %d), published in %s, delivered in %s", b.events, cfg.events, b.t.published, b.t.total)
	}
	checkStarts(t, "burst", r.burst.starts, cfg.events)

	for _, row := range []string{
		"| tiers | (a) raw HTTPS POST |", "| tiers | (b') bare Temporal, one regular activity |", "| tiers | (b) bare Temporal, one local activity, eager start |", "| tiers | (c) webhookd end to end |",
		"| tiers | (c)/(b) |", "| openloop | rate |", "| openloop | event-to-receipt p50 / p99 / max |",
		fmt.Sprintf("| fanout | webhooks | %d |", cfg.hooks), "| fanout | time to 202 |", "| fanout | time to last receipt |",
		"| fanout | starts by request / sweeper |", "| burst | events | 10 ", "| burst | intake |",
		"| burst | time to last delivery |", "| burst | deliveries/s |", "| burst | starts by request / sweeper |",
	} {
		if !strings.Contains(table.String(), row) {
			t.Errorf("the table has no row %q", row)
		}
	}
	if strings.Contains(table.String(), "≥") || strings.Contains(table.String(), "n/a") {
		t.Errorf("the table has a lower bound or a missing figure")
	}
}

// checkStarts checks that the starts metric counted every delivery workflow of a scenario, by the
// request or by the sweeper.
func checkStarts(t *testing.T, scenario string, d startDelta, want int) {
	t.Helper()
	if !d.ok {
		t.Errorf("%s: no %s on /metrics", scenario, startsMetric)
		return
	}
	if d.requestPath()+d.sweeper != want || d.activity != 0 {
		t.Errorf("%s: starts by request %d (%d through the fan-out) + by sweeper %d (+ by activity %d), want %d in all",
			scenario, d.requestPath(), d.fanout, d.sweeper, d.activity, want)
	}
}

// startWebhookd builds webhookd from this tree and serves it on SQLite, on a free port, against
// the Temporal server srv, trusting the receivers' certificate. It returns the API's base URL and
// an API key, and stops the process at cleanup.
func startWebhookd(t *testing.T, srv *temporaltest.Server, certFile string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "webhookd")
	// go test puts its own toolchain first on the PATH of the tests it runs.
	build := exec.Command("go", "build", "-o", bin, "github.com/webhookd/webhookd/cmd/webhookd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build webhookd: %v\n%s", err, out)
	}
	addr := freePort(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + srv.Address,
		"TEMPORAL_NAMESPACE=" + srv.Namespace,
		"WEBHOOKD_DATA_DIR=" + dir,
		"WEBHOOKD_DATABASE_URL=sqlite:" + filepath.Join(dir, "webhookd.db"),
		"WEBHOOKD_HTTP_ADDR=" + addr,
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_EXTRA_CA_FILE=" + certFile,
		"WEBHOOKD_RATE_LIMIT=100000",
		"WEBHOOKD_MAX_WEBHOOKS=100",
		"WEBHOOKD_LOG_LEVEL=warn",
	}
	// webhookd refuses WEBHOOKD_ variables it does not know, and the caller's TEMPORAL_ ones would
	// point it elsewhere: only this test's reach it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEBHOOKD_") && !strings.HasPrefix(kv, "TEMPORAL_") {
			env = append(env, kv)
		}
	}

	apikey := exec.Command(bin, "apikey", "create", "--owner-email", "e@x", "--name", "t")
	apikey.Env = env
	var stderr bytes.Buffer
	apikey.Stderr = &stderr
	out, err := apikey.Output()
	if err != nil {
		t.Fatalf("webhookd apikey create: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	key := strings.TrimSpace(lines[len(lines)-1])

	logFile, err := os.Create(filepath.Join(dir, "webhookd.log"))
	if err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bin, "serve")
	serve.Env, serve.Stdout, serve.Stderr = env, logFile, logFile
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			err = <-exited
		}
		if err != nil {
			t.Logf("webhookd serve ended: %v", err)
		}
		_ = logFile.Close() // the child's descriptor wrote the log; dumpLog reads it by name
		if t.Failed() {
			dumpLog(t, logFile.Name())
		}
	})

	api := "http://" + addr
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(api + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api, key
			}
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("webhookd serve exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhookd is not ready after a minute (GET /readyz: %v)", err)
		}
	}
}

// freePort returns a loopback address nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dumpLog logs the last lines of webhookd's log.
func dumpLog(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	t.Logf("last lines of webhookd's log:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
}
