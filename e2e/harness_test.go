//go:build e2e

package e2e

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// receiver is a real HTTPS endpoint. Its behaviour per request is set by the test; every request
// it gets is recorded.
type receiver struct {
	srv    *httptest.Server
	caFile string
	mu     sync.Mutex
	reqs   []receivedRequest
	// respond decides the reply to the n-th request (from 1) on path.
	respond func(n int, path string, w http.ResponseWriter)
	// respondTo, when set, decides the reply instead of respond, from the request as recorded.
	respondTo func(r receivedRequest, w http.ResponseWriter)
	conns     int
	// remotes are the remote addresses of its connections, in the order they came.
	remotes []string
}

type receivedRequest struct {
	Remote string
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{respond: func(int, string, http.ResponseWriter) {}}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := receivedRequest{Remote: r.RemoteAddr, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, got)
		if respondTo := rc.respondTo; respondTo != nil {
			rc.mu.Unlock()
			respondTo(got, w)
			return
		}
		n := 0
		for _, q := range rc.reqs {
			if q.Path == r.URL.Path {
				n++
			}
		}
		respond := rc.respond
		rc.mu.Unlock()
		respond(n, r.URL.Path, w)
	}))
	rc.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.mu.Lock()
			rc.conns++
			rc.remotes = append(rc.remotes, c.RemoteAddr().String())
			rc.mu.Unlock()
		}
	}
	rc.srv.StartTLS()
	t.Cleanup(rc.srv.Close)
	// Registered after Close, so it runs first: every delivery body the test got meets its schema.
	t.Cleanup(func() { checkDeliveryBodies(t, rc.requests("")) })
	cert := rc.srv.Certificate()
	rc.caFile = filepath.Join(t.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(rc.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *receiver) setRespond(f func(n int, path string, w http.ResponseWriter)) {
	rc.mu.Lock()
	rc.respond = f
	rc.mu.Unlock()
}

// setRespondTo makes f decide each reply from the request itself (its headers and body).
func (rc *receiver) setRespondTo(f func(r receivedRequest, w http.ResponseWriter)) {
	rc.mu.Lock()
	rc.respondTo = f
	rc.mu.Unlock()
}

// url returns the receiver's URL for path. httptest certificates are issued for 127.0.0.1 and
// example.com; the URL uses the IP, so tests run with private targets allowed unless they say not.
func (rc *receiver) url(path string) string { return rc.srv.URL + path }

func (rc *receiver) requests(path string) []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receivedRequest
	for _, r := range rc.reqs {
		if path == "" || r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (rc *receiver) connections() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.conns
}

// connectionsFrom returns the remote addresses of the connections it accepted.
func (rc *receiver) connectionsFrom() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.remotes...)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// besideOthers lets a system test run beside the others that call it, after every other test of
// the package has run alone (t.Parallel; make test passes -parallel 3). It is for a test whose
// stack is its own (a stack in this process has its own database, task queue and ids, uniqueIDs;
// or webhookd's binary, make run's stack, make cluster) and that judges counts and behaviour
// (every delivery arrives, none twice under another webhook-id; a notice, a page, an answer is
// what it must be) with waits of ten seconds or more. A test must not call it when it judges a
// latency, a rate or work per unit of time (the isolation, rate-limit and latency tests); when
// its outcome hangs on two things happening within a few seconds (a disable before a retry 2 s
// away, a warning inside a 2 s lead) or on an API call answering within the request timeout (of
// 20 concurrent recoveries, one answered 503 beside others); when it starts busy processes; or
// when it runs a cluster with replicas of role all: beside others, their eager starts and quick
// local activities turn into polled workflow tasks (TestClusterRoleAll read 24 polls for 200
// deliveries, against at most 20). At most one cluster runs beside others (two would fill the
// cores, and could draw the same ports): TestProductionCluster's check, a poll per delivery, only
// grows with load.
func besideOthers(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// webhookdBinary builds the real binary once per test process, for tests that run it.
func webhookdBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "webhookd-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "webhookd")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, "github.com/webhookd/webhookd/cmd/webhookd").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("build webhookd: %v\n%s", built.err, built.out)
	}
	return built.path
}
