package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// TestParseListen: flags win over the environment, the API has a default and the key does not, and
// every command line that cannot run is a usage error (exit 2) naming its flag.
func TestParseListen(t *testing.T) {
	env := []string{"WEBHOOKD_API_URL=http://api.example:9000/", "WEBHOOKD_API_KEY=whk_env"}
	base := []string{"--webhook", "7", "--forward-to", "http://localhost:3000/hooks"}
	t.Run("environment", func(t *testing.T) {
		c, err := parseListen(base, env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.API.String() != "http://api.example:9000" || c.Key != "whk_env" || c.WebhookID != 7 ||
			c.Target.String() != "http://localhost:3000/hooks" || c.Variant != "" || c.Since != nil ||
			c.Interval != time.Second || c.Timeout != 5*time.Second {
			t.Errorf("parsed %+v", c)
		}
	})
	t.Run("flags win", func(t *testing.T) {
		c, err := parseListen(append([]string{"--api", "https://other.example/base", "--key", "whk_flag", "--variant", "b",
			"--since", "2026-11-27T10:00:00+01:00", "--interval", "250ms", "--timeout", "2s"}, base...), env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.API.String() != "https://other.example/base" || c.Key != "whk_flag" || c.Variant != model.VariantB ||
			!c.Since.Equal(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)) || c.Interval != 250*time.Millisecond || c.Timeout != 2*time.Second {
			t.Errorf("parsed %+v", c)
		}
	})
	t.Run("default API", func(t *testing.T) {
		c, err := parseListen(append([]string{"--key", "k"}, base...), nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.API.String() != "http://127.0.0.1:8080" {
			t.Errorf("API = %s", c.API)
		}
	})

	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no key", base, nil, "--key or WEBHOOKD_API_KEY is required"},
		{"blank key", append([]string{"--key", " "}, base...), nil, "--key or WEBHOOKD_API_KEY is required"},
		{"no webhook", []string{"--forward-to", "http://localhost:3000"}, env, "--webhook is required"},
		{"webhook not an id", []string{"--webhook", "-3", "--forward-to", "http://localhost:3000"}, env, "--webhook is required"},
		{"no target", []string{"--webhook", "7"}, env, "--forward-to is required"},
		{"target without scheme", []string{"--webhook", "7", "--forward-to", "localhost:3000/hooks"}, env, "--forward-to: \"localhost:3000/hooks\" is not an http or https URL"},
		{"target not http", []string{"--webhook", "7", "--forward-to", "ftp://localhost/x"}, env, "--forward-to: \"ftp://localhost/x\" is not an http or https URL"},
		{"target without host", []string{"--webhook", "7", "--forward-to", "http:///hooks"}, env, "--forward-to: \"http:///hooks\" has no host"},
		{"target unparsable", []string{"--webhook", "7", "--forward-to", "http://[::1/x"}, env, "--forward-to: \"http://[::1/x\" is not a URL"},
		{"API not http", base, []string{"WEBHOOKD_API_URL=localhost:8080", "WEBHOOKD_API_KEY=k"}, "--api (or WEBHOOKD_API_URL): \"localhost:8080\" is not an http or https URL"},
		{"variant", append([]string{"--variant", "C"}, base...), env, "--variant: \"C\" is not A or B"},
		{"since", append([]string{"--since", "yesterday"}, base...), env, "--since: \"yesterday\" is not an ISO 8601 time"},
		{"interval", append([]string{"--interval", "10ms"}, base...), env, "--interval: 10ms is shorter than 100ms"},
		{"timeout", append([]string{"--timeout", "0s"}, base...), env, "--timeout: 0s is not a positive duration"},
		{"unknown flag", append([]string{"--port", "3000"}, base...), env, "listen: flag provided but not defined: -port"},
		{"stray argument", append(base, "extra"), env, "listen: unexpected argument \"extra\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseListen(tt.args, tt.env, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (usage)", code)
			}
		})
	}
}

// fakeAPI answers the reads listen makes as webhookd's API does: webhook 7 is variant A's, webhook
// 8 variant B's, the key "good" is the account's manage key and "read" its read key, which may not
// read a secret; events are what the test adds.
type fakeAPI struct {
	mu     sync.Mutex
	events []map[string]any
	reads  []string
}

const fakeSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, r.URL.RequestURI())
	variant, key := "B", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/svc/v2")
	if a, isA := strings.CutPrefix(r.URL.Path, "/api/svc/v2"); isA {
		variant, key, rest, ok = "A", r.Header.Get("x-api-key"), a, true
	}
	answer := func(status int, data any, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "message": message})
	}
	switch {
	case !ok:
		answer(http.StatusNotFound, nil, "Route not found")
	case key != "good" && key != "read":
		answer(http.StatusUnauthorized, nil, "Invalid API key")
	case key == "read" && strings.HasSuffix(rest, "/secret"):
		answer(http.StatusForbidden, nil, "this API key's scope is read; this request needs the manage scope")
	case rest == "/webhooks/7" && variant == "A", rest == "/webhooks/8" && variant == "B":
		answer(http.StatusOK, map[string]any{"id": 7, "eventType": map[string]string{"A": "campaign.created", "B": "lead.captured"}[variant]}, "")
	case rest == "/webhooks/7/secret" && variant == "A", rest == "/webhooks/8/secret" && variant == "B":
		answer(http.StatusOK, map[string]any{"secret": fakeSecret}, "")
	case rest == "/events":
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		page := []map[string]any{}
		for _, ev := range f.events {
			if ev["id"].(int64) > after {
				page = append(page, ev)
			}
		}
		answer(http.StatusOK, page, "")
	default:
		answer(http.StatusNotFound, nil, "Webhook not found")
	}
}

func (f *fakeAPI) add(ev map[string]any) {
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
}

// TestListenErrors: a bad key, an unknown webhook, an API that does not answer or is not webhookd
// end the command with one line naming the cause (exit 1), never a trace.
func TestListenErrors(t *testing.T) {
	api := httptest.NewServer(&fakeAPI{})
	defer api.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	notWebhookd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>") }))
	defer notWebhookd.Close()

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad key", []string{"--api", api.URL, "--key", "bad", "--webhook", "7"},
			"GET /api/svc/v2/webhooks/7: the API refused the key (401 Invalid API key): check --key or WEBHOOKD_API_KEY"},
		{"read key", []string{"--api", api.URL, "--key", "read", "--webhook", "7"},
			"GET /api/svc/v2/webhooks/7/secret: the API refused the key's scope (403 this API key's scope is read; this request needs the manage scope): webhookd listen reads the webhook and its secret, which needs a manage key"},
		{"unknown webhook", []string{"--api", api.URL, "--key", "good", "--webhook", "9"},
			"webhook 9: not found in variant A or B of this key's account"},
		{"webhook of the other variant", []string{"--api", api.URL, "--key", "good", "--webhook", "7", "--variant", "B"},
			"webhook 7: not found in variant B of this key's account"},
		{"API unreachable", []string{"--api", closed, "--key", "good", "--webhook", "7"},
			"the API at " + closed + " does not answer: dial tcp"},
		{"not webhookd", []string{"--api", notWebhookd.URL, "--key", "good", "--webhook", "7"},
			"GET /api/svc/v2/webhooks/7: the answer is not webhookd's JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"listen", "--forward-to", "http://127.0.0.1:1/hooks"}, tt.args...)
			err := run(context.Background(), args, nil, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "goroutine") {
				t.Errorf("error %q is not one line", err)
			}
			if code := exitCode(err); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
}

// TestListenForwardsAsDelivered: only events after the start are forwarded, with the body and
// headers a delivery carries, built from the event log's answer (whose JSON escapes < and &: the
// stored canonical bytes are restored); a redirect is reported, not followed; Ctrl-C ends it
// without an error.
func TestListenForwardsAsDelivered(t *testing.T) {
	for _, variant := range []model.Variant{model.VariantA, model.VariantB} {
		t.Run(string(variant), func(t *testing.T) {
			id, eventType := "7", "campaign.created"
			if variant == model.VariantB {
				id, eventType = "8", "lead.captured"
			}
			typeField := variant.Spec().TypeField
			fake := &fakeAPI{}
			fake.add(map[string]any{"id": int64(40), typeField: eventType, "data": map[string]any{"old": true}, "occurredAt": "2026-11-27T10:00:00.000Z"})
			api := httptest.NewServer(fake)
			defer api.Close()
			got := make(chan *http.Request, 4)
			bodies := make(chan []byte, 4)
			var n atomic.Int32
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- r
				bodies <- b
				if n.Add(1) == 2 {
					http.Redirect(w, r, "/elsewhere", http.StatusFound)
				}
			}))
			defer rc.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"listen", "--api", api.URL, "--key", "good", "--webhook", id, "--forward-to", rc.URL + "/hooks", "--interval", "100ms"}, nil, &out, &errOut)
			}()
			eventually(t, "listen started", func() bool { return strings.Contains(errOut.String(), "Ctrl-C to stop") })
			// The API's JSON encoder escapes <, > and & (Go's default): the data's canonical form has them.
			raw := json.RawMessage(`{"campaignId":1,"name":"a \u003cb\u003e \u0026 c"}`)
			occurred := "2026-11-27T21:40:01.123Z"
			fake.add(map[string]any{"id": int64(41), typeField: eventType, "data": raw, "occurredAt": occurred})
			fake.add(map[string]any{"id": int64(42), typeField: eventType, "data": raw, "occurredAt": occurred})

			var reqs []*http.Request
			var bs [][]byte
			for range 2 {
				select {
				case r := <-got:
					reqs, bs = append(reqs, r), append(bs, <-bodies)
				case <-time.After(10 * time.Second):
					t.Fatalf("the receiver got %d of 2 events; stdout %q, stderr %q", len(reqs), out.String(), errOut.String())
				}
			}
			at, _ := time.Parse(time.RFC3339Nano, occurred)
			want := wire.Body(variant.Spec().Body, eventType, json.RawMessage(`{"campaignId":1,"name":"a <b> & c"}`), at, fakeSecret)
			for i, r := range reqs {
				evID := int64(41 + i)
				if string(bs[i]) != string(want) {
					t.Errorf("body\n%s\nwant\n%s", bs[i], want)
				}
				msgID := wire.MessageID(evID, map[string]int64{"7": 7, "8": 8}[id])
				ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
				sig, _ := wire.StandardSignature(msgID, time.Unix(ts, 0), bs[i], fakeSecret)
				if r.Method != http.MethodPost || r.URL.Path != "/hooks" || r.Header.Get("webhook-id") != msgID ||
					r.Header.Get("webhook-signature") != sig || time.Since(time.Unix(ts, 0)) > time.Minute ||
					r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Service-Event") != eventType ||
					r.Header.Get("User-Agent") != "webhookd/"+version {
					t.Errorf("request %d: %s %s %v", i, r.Method, r.URL.Path, r.Header)
				}
			}
			eventually(t, "two lines", func() bool { return strings.Count(out.String(), "\n") == 2 })
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			line := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  evt (\d+)  ` + regexp.QuoteMeta(eventType) + `  -> (.+)  \d+ms$`)
			for i, status := range []string{"200 OK", "302 Found (redirects are not followed)"} {
				m := line.FindStringSubmatch(lines[i])
				if m == nil || m[1] != strconv.Itoa(41+i) || m[2] != status {
					t.Errorf("line %d %q, want event %d -> %s", i, lines[i], 41+i, status)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after Ctrl-C: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("listen did not stop on Ctrl-C")
			}
			if len(got) != 0 {
				t.Errorf("the old event or a repeat was forwarded")
			}
		})
	}
}

// TestListenRidesOutAnAPIOutage: a 5xx while following is reported once and asked again.
func TestListenRidesOutAnAPIOutage(t *testing.T) {
	fake := &fakeAPI{}
	var down sync.Mutex
	failing := false
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Lock()
		f := failing
		down.Unlock()
		if f && strings.HasSuffix(r.URL.Path, "/events") {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"data":null,"message":"Service unavailable"}`)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	defer api.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"listen", "--api", api.URL, "--key", "good", "--webhook", "7", "--forward-to", "http://127.0.0.1:1/", "--interval", "100ms"}, nil, &out, &errOut)
	}()
	eventually(t, "listen started", func() bool { return strings.Contains(errOut.String(), "Ctrl-C to stop") })
	down.Lock()
	failing = true
	down.Unlock()
	eventually(t, "the outage reported", func() bool {
		return strings.Contains(errOut.String(), "the API answered 503 Service unavailable (asking again every 100ms)")
	})
	down.Lock()
	failing = false
	down.Unlock()
	eventually(t, "the recovery reported", func() bool { return strings.Contains(errOut.String(), "the API answers again") })
	if n := strings.Count(errOut.String(), "503"); n != 1 {
		t.Errorf("the outage reported %d times:\n%s", n, errOut.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("after Ctrl-C: %v", err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
