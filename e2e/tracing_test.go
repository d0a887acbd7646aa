//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/otlpsink"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// tracedStack is the built webhookd binary (API and worker in one process) on a Temporal dev
// server and PostgreSQL, exporting its spans over OTLP/HTTP to an in-process collector.
type tracedStack struct {
	stack
	proc      *webhookdProcess
	collector *otlpsink.Sink
}

func startTracedStack(t *testing.T, env ...string) *tracedStack {
	t.Helper()
	collector := otlpsink.New(true)
	csrv := httptest.NewServer(collector)
	t.Cleanup(csrv.Close)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	db := openTestDB(t, dbURL)
	apiAddr := freeAddr(t)
	p := &webhookdProcess{bin: webhookdBinary(t), logFile: filepath.Join(t.TempDir(), "webhookd.log"), env: append(webhookdEnv(t, dbURL, apiAddr, "traced", tsrv, rc,
		"WEBHOOKD_RETRY_SCHEDULE=1s",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+csrv.URL,
	), env...), healthz: "http://" + apiAddr + "/healthz"}
	p.start(t)
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("webhookd's log (end):\n%s", p.logs(t))
		}
	})
	// With the worker up, the request's start is eager (role all): the workflow's first task, and
	// the first attempt in it, come back in the start's answer, the path a busy stack takes.
	eventually(t, 30*time.Second, "the worker started", func() bool { return strings.Contains(p.logs(t), "temporal worker started") })
	key, _, err := model.CreateAPIKey(context.Background(), db, "traced@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	return &tracedStack{stack: stack{apiURL: "http://" + apiAddr, key: key, db: db, rc: rc}, proc: p, collector: collector}
}

// traceparent is a W3C traceparent header: version, trace id, parent span id, flags.
var traceparent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// TestTraceOfOneEvent: with OTEL_EXPORTER_OTLP_ENDPOINT set, one published event whose first
// attempt fails and whose retry succeeds gives one trace: the intake request's span, the
// workflow's start and run, both attempts (the first a local activity, the retry a regular one on
// the retry task queue) and their POSTs, each POST the parent named by the traceparent its
// receiver got. A caller's traceparent is continued. No span name or attribute holds the
// webhook's secret, the API key, the payload, the signature or the URL's path.
func TestTraceOfOneEvent(t *testing.T) {
	st := startTracedStack(t, "OTEL_BSP_SCHEDULE_DELAY=100")
	const path = "/traced/tok3n-in-path"
	st.rc.setRespond(func(n int, _ string, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	hook, secret := st.createWebhook(t, "A", st.rc.url(path), "campaign.created")
	data := maps.Clone(campaign)
	data["name"] = "payload-marker-Q7"
	eventID := st.publish(t, "A", "campaign.created", data)
	eventually(t, 30*time.Second, "the retry delivered", func() bool { return len(st.rc.requests(path)) == 2 })

	reqs := st.rc.requests(path)
	var traceID string
	var parents []string
	for i, r := range reqs {
		m := traceparent.FindStringSubmatch(r.Header.Get("traceparent"))
		if m == nil {
			t.Fatalf("attempt %d: traceparent %q, want a W3C traceparent", i+1, r.Header.Get("traceparent"))
		}
		if traceID != "" && m[1] != traceID {
			t.Fatalf("the attempts' traceparents name two traces: %s and %s", traceID, m[1])
		}
		traceID = m[1]
		parents = append(parents, m[2])
		if r.Header.Get("tracestate") != "" || r.Header.Get("baggage") != "" {
			t.Errorf("attempt %d sent tracestate %q, baggage %q; want traceparent only", i+1, r.Header.Get("tracestate"), r.Header.Get("baggage"))
		}
	}

	names := []string{"POST /api/svc/v2/events", "StartWorkflow:DeliveryWorkflow", "RunWorkflow:DeliveryWorkflow",
		"StartActivity:Deliver", "RunActivity:Deliver", "POST"}
	var trace []otlpsink.Span
	eventually(t, 30*time.Second, "the event's trace at the collector", func() bool {
		trace = nil
		for _, s := range st.collector.Spans() {
			if s.TraceID == traceID {
				trace = append(trace, s)
			}
		}
		count := map[string]int{}
		for _, s := range trace {
			count[s.Name]++
		}
		return count["RunWorkflow:DeliveryWorkflow"] >= 1 && count["RunActivity:Deliver"] == 2 && count["POST"] == 2 && count[names[0]] == 1
	})
	byID := map[string]otlpsink.Span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	// The chain of parents, from each POST up to the request, which has none: one trace, from the
	// request to the receiver.
	for i, p := range parents {
		post, ok := byID[p]
		if !ok || post.Name != "POST" || post.Kind != 3 {
			t.Fatalf("attempt %d: the traceparent's parent %s is not a POST client span of the trace: %+v", i+1, p, post)
		}
		var chain []string
		for s := post; ; {
			chain = append(chain, s.Name)
			if s.ParentSpanID == "" {
				break
			}
			parent, ok := byID[s.ParentSpanID]
			if !ok {
				t.Fatalf("attempt %d: %s's parent %s is not in the trace (chain %v)", i+1, s.Name, s.ParentSpanID, chain)
			}
			s = parent
		}
		slices.Reverse(chain)
		if !slices.Equal(chain, names) {
			t.Errorf("attempt %d: spans from the request to the POST:\n%v\nwant\n%v", i+1, chain, names)
		}
		want := map[string]string{
			"webhookd.attempt": fmt.Sprint(i + 1), "webhookd.event.id": fmt.Sprint(eventID), "webhookd.webhook.id": fmt.Sprint(hook),
			"webhookd.event.type": "campaign.created", "server.address": "127.0.0.1", "http.request.method": "POST",
			"http.response.status_code": []string{"500", "200"}[i],
		}
		for k, v := range want {
			if post.Attributes[k] != v {
				t.Errorf("attempt %d: POST span %s = %q, want %q (%v)", i+1, k, post.Attributes[k], v, post.Attributes)
			}
		}
		if i == 0 && post.Attributes["error.type"] != "http_status" {
			t.Errorf("attempt 1: POST span error.type = %q, want http_status", post.Attributes["error.type"])
		}
	}
	for _, s := range trace {
		if s.Name == names[0] {
			if s.Attributes["http.route"] != "/api/svc/v2/events" || s.Attributes["http.response.status_code"] != "202" || s.Kind != 2 ||
				s.Resource["service.name"] != "webhookd" {
				t.Errorf("request span: %+v", s)
			}
		}
	}

	// The attempt log records the traceparent the receiver got, beside the other headers.
	var logged []string
	if err := st.db.NewSelect().Table("delivery_attempts").Column("request_headers").
		Where("delivery_id = ?", st.delivery(t, eventID, hook).ID).Order("attempt").Scan(context.Background(), &logged); err != nil {
		t.Fatal(err)
	}
	for i, h := range logged {
		var headers map[string]string
		if err := json.Unmarshal([]byte(h), &headers); err != nil {
			t.Fatal(err)
		}
		if want := reqs[i].Header.Get("traceparent"); headers["Traceparent"] != want {
			t.Errorf("attempt %d's logged headers %s lack its traceparent %s", i+1, h, want)
		}
	}
	if len(logged) != 2 {
		t.Errorf("%d attempts logged, want 2", len(logged))
	}

	// A caller's trace is continued.
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	st.publish(t, "A", "campaign.created", campaign, "traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	eventually(t, 30*time.Second, "the caller's event delivered", func() bool { return len(st.rc.requests(path)) == 3 })
	if m := traceparent.FindStringSubmatch(st.rc.requests(path)[2].Header.Get("traceparent")); m == nil || m[1] != callerTrace {
		t.Errorf("a caller's traceparent: the receiver got %q, want trace %s", st.rc.requests(path)[2].Header.Get("traceparent"), callerTrace)
	}

	// Nothing secret anywhere: not in the spans of this event, nor of the other requests
	// (creating the webhook answers its secret).
	forbidden := []string{secret, st.key, st.key[len(st.key)-16:], "payload-marker-Q7", "Spring launch", "tok3n", reqs[0].Header.Get("webhook-signature")}
	for _, s := range st.collector.Spans() {
		texts := append([]string{s.Name}, s.Events...)
		for k, v := range s.Attributes {
			texts = append(texts, k+"="+v)
		}
		for _, text := range texts {
			for _, f := range forbidden {
				if f != "" && strings.Contains(text, f) {
					t.Errorf("span %s records %q: %s", s.Name, f, text)
				}
			}
		}
	}
}

// TestTracesFlushedAtExit: a span still queued when webhookd is stopped is exported before it
// exits. The batch would wait an hour; only the shutdown sends it.
func TestTracesFlushedAtExit(t *testing.T) {
	st := startTracedStack(t, "OTEL_BSP_SCHEDULE_DELAY=3600000")
	st.createWebhook(t, "A", st.rc.url("/flushed"), "campaign.created")
	st.publish(t, "A", "campaign.created", campaign)
	eventually(t, 30*time.Second, "the delivery", func() bool { return len(st.rc.requests("/flushed")) == 1 })
	if n := st.collector.Count(); n != 0 {
		t.Fatalf("%d spans exported before the stop; the test would prove nothing", n)
	}
	if err := st.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := st.proc.cmd.Wait(); err != nil {
		t.Fatalf("webhookd after SIGTERM: %v\n%s", err, st.proc.logs(t))
	}
	st.proc.cmd = nil
	posts := 0
	for _, s := range st.collector.Spans() {
		if s.Name == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("after the stop the collector has %d POST spans of %d, want 1", posts, st.collector.Count())
	}
}
