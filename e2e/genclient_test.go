//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/docs/openapitest"
	"github.com/webhookd/webhookd/model"
)

// TestGeneratedClient (issue 32): an integrator generates a Go client from docs/openapi.yaml with
// oapi-codegen v2.8.2 and no configuration, and it works first try. The test generates it into the
// nested module e2e/genclient (which pins the generator as a tool), vets it, and runs that
// module's test against the real stack, in both variants: create, list, read, PUT, PATCH, a limit
// set then cleared with null, a typed event published, delete, a 404 afterwards, and the audit
// log (GET <prefix>/audit-log) naming the delete first, made with the key; in variant A also
// ordering set and cleared, and the webhook's lanes listed and read; a read key refused a change
// (403, issue 46) and given a read-only portal link. The
// generated client reaches the API through a proxy that checks every request and response against
// the document, so live traffic is held to it as the handler tests' recordings are.
func TestGeneratedClient(t *testing.T) {
	besideOthers(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to generate and test the client: %v", err)
	}
	began := time.Now()
	st := newStack(t, stackOptions{allowPrivate: true})
	t.Logf("stack started in %v", time.Since(began).Round(time.Millisecond))

	oa := openapitest.New(t)
	proxy := &validatingProxy{upstream: st.apiURL, oa: oa}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)

	dir, err := filepath.Abs("genclient")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "client"), 0o755); err != nil {
		t.Fatal(err)
	}
	readKey, _, err := model.CreateScopedAPIKey(t.Context(), st.db, "owner@example.com", "genclient read", model.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"WEBHOOKD_API_URL="+ps.URL,
		"WEBHOOKD_API_KEY_A="+st.key,
		"WEBHOOKD_BEARER_B="+st.key,
		"WEBHOOKD_RECEIVER_URL="+st.rc.url(""),
		"WEBHOOKD_READ_KEY="+readKey,
	)
	run := func(name string, args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s (go %s in e2e/genclient): %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("generate", "tool", "oapi-codegen", "-generate", "types,client", "-package", "client",
		"-o", "client/client.gen.go", "../../docs/openapi.yaml")
	run("vet", "vet", "./...")
	run("test", "test", "-count=1", "./...")

	if proxy.count() == 0 {
		t.Fatal("no request of the generated client went through the validating proxy")
	}
	for _, m := range proxy.mismatches() {
		t.Error(m)
	}
	t.Logf("%d exchanges checked against docs/openapi.yaml; %v in all", proxy.count(), time.Since(began).Round(time.Millisecond))
}

// validatingProxy forwards every request to upstream and checks the exchange against
// docs/openapi.yaml (openapitest: the response always, the request when it was accepted).
type validatingProxy struct {
	upstream string
	oa       *openapitest.Validator

	mu       sync.Mutex
	n        int
	mismatch []string
}

func (p *validatingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqBody, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(reqBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		p.record(fmt.Sprintf("%s %s: upstream: %v", r.Method, r.URL.RequestURI(), err))
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		p.record(fmt.Sprintf("%s %s: read the answer: %v", r.Method, r.URL.RequestURI(), err))
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if err := p.oa.Validate(r, reqBody, resp.StatusCode, resp.Header, body); err != nil {
		p.record(fmt.Sprintf("%s %s -> %d: not as documented in docs/openapi.yaml: %v\nrequest body: %.2048s\nbody: %.2048s",
			r.Method, r.URL.RequestURI(), resp.StatusCode, err, reqBody, body))
	} else {
		p.record("")
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// record counts an exchange and keeps its mismatch, if any.
func (p *validatingProxy) record(mismatch string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if mismatch != "" {
		p.mismatch = append(p.mismatch, mismatch)
	}
}

func (p *validatingProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *validatingProxy) mismatches() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.mismatch...)
}
