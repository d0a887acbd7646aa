//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/smtptest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
)

// TestCrashAfterCommitLosesNothing runs the real binary as the API with Temporal unreachable, so
// an accepted event is committed but its workflow cannot start, kills the process with SIGKILL, and
// shows that a worker started afterwards delivers the event anyway (its sweeper finds the outbox).
func TestCrashAfterCommitLosesNothing(t *testing.T) {
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	rc := startReceiver(t)
	apiAddr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--role", "api")
	cmd.Env = append(os.Environ(),
		"WEBHOOKD_DATABASE_URL="+dbURL,
		"WEBHOOKD_HTTP_ADDR="+apiAddr,
		"TEMPORAL_ADDRESS="+freeAddr(t), // nothing listens there
		"WEBHOOKD_SECRET_KEY="+base64.StdEncoding.EncodeToString(testSecretKey),
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_DATA_DIR="+t.TempDir(),
	)
	logs := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	eventually(t, 30*time.Second, "api up", func() bool {
		resp, err := http.Get("http://" + apiAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})

	db := openTestDB(t, dbURL)
	key, _, err := model.CreateAPIKey(context.Background(), db, "crash@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{apiURL: "http://" + apiAddr, key: key, db: db, rc: rc}
	webhookID, _ := st.createWebhook(t, "A", rc.url("/after-crash"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", campaign)

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	d := st.delivery(t, eventID, webhookID)
	if d.DispatchedAt != nil {
		t.Fatalf("the delivery was dispatched before the crash; the test proves nothing (%+v)\n%s", d, logs)
	}

	// A worker comes up after the crash, on a Temporal that is reachable now.
	st.tc = temporaltest.Start(t).Client(t)
	st.mb = smtptest.Start(t)
	st.registry = prometheus.NewRegistry()
	st.queue = fmt.Sprintf("crash-%d", time.Now().UnixNano())
	st.starter = &dispatch.Dispatcher{Client: st.tc, TaskQueue: st.queue, Schedule: []time.Duration{time.Second}, RetryWindow: time.Hour, AttemptTimeout: 2 * time.Second}
	box, _ := secretbox.New(testSecretKey)
	st.startWorker(t, box, egress.AddressPolicy{AllowPrivate: true}, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))

	eventually(t, 60*time.Second, "delivery after the crash", func() bool { return len(rc.requests("/after-crash")) == 1 })
	st.waitDelivered(t, eventID)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
