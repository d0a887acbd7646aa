//go:build e2e

package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/wire"
)

// TestListenForwardsEventsAsDelivered runs the real `webhookd listen` against the stack's API, with
// the key and address from the environment, forwarding to a plain-HTTP receiver on 127.0.0.1 (an
// address the service itself would refuse without WEBHOOKD_ALLOW_PRIVATE_TARGETS and
// WEBHOOKD_ALLOW_HTTP_TARGETS). Of the events published while it runs, the 20 of the webhook's
// type arrive, none of another type and none published before it started; each verifies with the
// Standard Webhooks library and the webhook's secret (variant B's body signature too, as
// docs/signatures.md says), under the webhook-id of the real delivery and with its very body.
// Ctrl-C ends it with exit status 0.
func TestListenForwardsEventsAsDelivered(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true})
	bin := webhookdBinary(t)
	t.Run("errors", func(t *testing.T) {
		hook, _ := st.createWebhook(t, "A", st.rc.url("/errors"), "campaign.created")
		for _, tc := range []struct {
			name string
			args []string
			code int
			want string
		}{
			{"bad key", []string{"--key", "whk_not_a_key", "--webhook", fmt.Sprint(hook)}, 1, "the API refused the key (401"},
			{"unknown webhook", []string{"--webhook", fmt.Sprint(hook + 1000)}, 1, fmt.Sprintf("webhook %d: not found in variant A or B of this key's account", hook+1000)},
			{"bad URL", []string{"--webhook", fmt.Sprint(hook), "--forward-to", "localhost:3000"}, 2, `--forward-to: "localhost:3000" is not an http or https URL`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				args := append([]string{"listen", "--forward-to", "http://127.0.0.1:1/hooks"}, tc.args...)
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "WEBHOOKD_API_URL="+st.apiURL, "WEBHOOKD_API_KEY="+st.key)
				out, err := cmd.CombinedOutput()
				if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "goroutine") {
					t.Errorf("exit %v, output %q; want exit %d and %q", err, out, tc.code, tc.want)
				}
			})
		}
	})
	for _, tc := range []struct{ variant, eventType, otherType string }{
		{"A", "campaign.created", "campaign.updated"},
		{"B", "lead.captured", "presave.completed"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			real := "/real/" + tc.variant
			webhookID, secret := st.createWebhook(t, tc.variant, st.rc.url(real), tc.eventType)
			st.createWebhook(t, tc.variant, st.rc.url("/other/"+tc.variant), tc.otherType)
			data := func(i int) map[string]any {
				d := maps.Clone(sampleData[tc.eventType].(map[string]any))
				if tc.variant == "A" {
					d["id"] = 1000 + i
				} else {
					d["collectDataId"] = fmt.Sprintf("blk_%d", i)
				}
				return d
			}
			old := map[int64]bool{}
			for i := range 2 { // before listen starts: never forwarded
				old[st.publish(t, tc.variant, tc.eventType, data(-i))] = true
			}

			local := newLocalReceiver(t)
			cmd := exec.Command(bin, "listen", "--webhook", fmt.Sprint(webhookID), "--forward-to", local.srv.URL+"/hooks", "--interval", "200ms")
			cmd.Env = append(os.Environ(), "WEBHOOKD_API_URL="+st.apiURL, "WEBHOOKD_API_KEY="+st.key)
			out := startListen(t, cmd)

			published := map[int64]bool{}
			for i := range 20 {
				published[st.publish(t, tc.variant, tc.eventType, data(i))] = true
				if i%7 == 3 {
					st.publish(t, tc.variant, tc.otherType, sampleData[tc.otherType])
				}
			}
			eventually(t, 60*time.Second, "20 events forwarded", func() bool { return len(local.requests()) >= 20 })
			// The two old events go to the same webhook, so counting requests would not do: wait
			// until each of the 20 has been delivered to the webhook's own URL.
			delivered := map[string][]byte{} // webhook-id -> the real delivery's body
			eventually(t, 60*time.Second, "the 20 events delivered", func() bool {
				for _, r := range st.rc.requests(real) {
					delivered[r.Header.Get("Webhook-Id")] = r.Body
				}
				for id := range published {
					if _, ok := delivered[wire.MessageID(id, webhookID)]; !ok {
						return false
					}
				}
				return true
			})
			if err := out.interrupt(10 * time.Second); err != nil {
				t.Fatalf("listen after Ctrl-C: %v\nstderr: %s", err, out.stderr.String())
			}

			wh, err := standardwebhooks.NewWebhook(secret)
			if err != nil {
				t.Fatal(err)
			}
			got := local.requests()
			if len(got) != 20 {
				t.Errorf("the receiver got %d requests, want 20", len(got))
			}
			seen := map[int64]bool{}
			for _, r := range got {
				var eventID, hook int64
				if _, err := fmt.Sscanf(r.Header.Get("Webhook-Id"), "msg_%d_%d", &eventID, &hook); err != nil || hook != webhookID || !published[eventID] || seen[eventID] {
					t.Errorf("webhook-id %q: not one of the 20 events published to webhook %d, or twice (old %v)", r.Header.Get("Webhook-Id"), webhookID, old[eventID])
					continue
				}
				seen[eventID] = true
				if err := wh.Verify(r.Body, r.Header); err != nil {
					t.Errorf("event %d: Standard Webhooks verification: %v", eventID, err)
				}
				if tc.variant == "B" {
					if err := verifyBodyB(r.Body, secret); err != nil {
						t.Errorf("event %d: %v", eventID, err)
					}
				}
				if want, ok := delivered[r.Header.Get("Webhook-Id")]; !ok || string(r.Body) != string(want) {
					t.Errorf("event %d: forwarded body\n%s\nthe delivery's\n%s", eventID, r.Body, want)
				}
				if r.Method != http.MethodPost || r.Path != "/hooks" || r.Header.Get("Content-Type") != "application/json" ||
					r.Header.Get("X-Service-Event") != tc.eventType || !strings.HasPrefix(r.Header.Get("User-Agent"), "webhookd/") {
					t.Errorf("event %d: %s %s %v", eventID, r.Method, r.Path, r.Header)
				}
			}
			if len(seen) != 20 {
				t.Errorf("%d of the 20 events verified", len(seen))
			}

			line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  evt (\d+)  ` + regexp.QuoteMeta(tc.eventType) + `  -> 200 OK  \d+ms$`)
			lines := out.lines()
			if len(lines) != 20 {
				t.Errorf("stdout has %d lines, want 20:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				if !line.MatchString(l) {
					t.Errorf("stdout line %q, want one like 2026-11-27T21:40:01Z  evt 123  %s  -> 200 OK  12ms", l, tc.eventType)
				}
			}
			t.Logf("forwarded and verified %d of 20; first line: %s", len(seen), first(lines))
		})
	}
}

func first(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// verifyBodyB checks variant B's body signature as docs/signatures.md tells a receiver to:
// HMAC-SHA256, keyed with the secret string itself, of the body without its signature field (the
// last one, so JSON.stringify of the rest is the text before it), lowercase hex after "sha256=".
func verifyBodyB(body []byte, secret string) error {
	var parsed struct {
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(body, &parsed); err != nil {
		return err
	}
	field := `,"signature":` + fmt.Sprintf("%q", parsed.Signature) + `}`
	unsigned, ok := strings.CutSuffix(string(body), field)
	if !ok {
		return fmt.Errorf("body signature: %s does not end with the signature field", body)
	}
	unsigned += "}"
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(unsigned))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(want), []byte(parsed.Signature)) {
		return fmt.Errorf("body signature %s, want %s", parsed.Signature, want)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(unsigned), &fields); err != nil || len(fields) != 3 || fields["event"] == nil || fields["timestamp"] == nil || fields["data"] == nil {
		return fmt.Errorf("body without its signature %s: not {event, timestamp, data} (%v)", unsigned, err)
	}
	return nil
}

// localReceiver is a receiver under development: plain HTTP on 127.0.0.1.
type localReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []localRequest
}

type localRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

func newLocalReceiver(t *testing.T) *localReceiver {
	lr := &localReceiver{}
	lr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		lr.mu.Lock()
		lr.reqs = append(lr.reqs, localRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		lr.mu.Unlock()
	}))
	t.Cleanup(lr.srv.Close)
	return lr
}

func (lr *localReceiver) requests() []localRequest {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]localRequest(nil), lr.reqs...)
}

// listenProc is a running `webhookd listen`: its output, and its exit once it ends.
type listenProc struct {
	cmd            *exec.Cmd
	done           chan struct{} // closed when it has exited, with err
	err            error
	stdout, stderr lockedBuffer
}

// startListen starts cmd and waits until it says it listens: events published from then on are
// new to it.
func startListen(t *testing.T, cmd *exec.Cmd) *listenProc {
	t.Helper()
	p := &listenProc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	eventually(t, 30*time.Second, "listen started", func() bool { return strings.Contains(p.stderr.String(), "Ctrl-C to stop") })
	return p
}

// interrupt sends Ctrl-C and returns how listen ended, waiting at most timeout.
func (p *listenProc) interrupt(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("still running %s after Ctrl-C", timeout)
	}
}

func (p *listenProc) lines() []string {
	s := strings.TrimSpace(p.stdout.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
