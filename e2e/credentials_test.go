//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/workflows"
)

// secretsAbsent fails t if text, read from where, holds any of secrets (name: value). Each of known
// must be in text, so that a search that cannot read the place fails instead of passing.
func secretsAbsent(t *testing.T, where, text string, secrets map[string]string, known ...string) {
	t.Helper()
	for _, k := range known {
		if !strings.Contains(text, k) {
			t.Fatalf("%s does not hold %q: the search does not read it", where, k)
		}
	}
	for name, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %s", where, name)
		}
	}
}

// mustJSON is v in JSON: an answer as a secret search reads it.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// payloadData is a payload's data in a history event's JSON.
var payloadData = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)

// TestCredentialsStayHidden runs the built binary at debug level, with tracing on, through what
// handles credentials: an API key, a webhook's signing secret made by webhookd and one given by
// the caller, a portal link's token, an egress proxy's password (every delivery goes through it),
// a failed attempt and its retry. None of those values, nor
// WEBHOOKD_SECRET_KEY, may appear in webhookd's log, on /metrics, in the attempt log (headers,
// answers, errors), in the delivery workflow's Temporal history, or in a span.
func TestCredentialsStayHidden(t *testing.T) {
	// Every delivery goes through an egress proxy that asks for a password.
	proxyRandom := make([]byte, 16)
	if _, err := rand.Read(proxyRandom); err != nil {
		t.Fatal(err)
	}
	proxyPassword := "proxy-" + hex.EncodeToString(proxyRandom)
	proxy := startConnectProxy(t, "webhookd", proxyPassword)
	proxyURL := &url.URL{Scheme: "http", Host: proxy.ln.Addr().String(), User: url.UserPassword("webhookd", proxyPassword)}
	st := startTracedStack(t, "WEBHOOKD_LOG_LEVEL=debug", "OTEL_BSP_SCHEDULE_DELAY=100", "WEBHOOKD_EGRESS_PROXY="+proxyURL.String())
	const path = "/credentials"
	hook, made := st.createWebhook(t, "B", st.rc.url(path), "lead.captured")
	// The registration's test event first; then the event's first attempt is refused, so that an
	// error and a retry go through the logs and the attempt log too.
	eventually(t, 30*time.Second, "the test event", func() bool { return len(st.rc.requests(path)) == 1 })
	var refused atomic.Bool
	st.rc.setRespond(func(_ int, _ string, w http.ResponseWriter) {
		if refused.CompareAndSwap(false, true) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"first attempt refused"}`))
		}
	})
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	own := "whsec_" + base64.StdEncoding.EncodeToString(random)
	status, body, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/webhooks/%d/secret/rotate", hook), map[string]any{"secret": own})
	if status != http.StatusOK {
		t.Fatalf("rotate with an own secret: %d %v", status, body)
	}
	status, body, _ = st.call(t, "B", "POST", "/v2/svc/v2/portal-sessions", map[string]any{})
	if status != http.StatusCreated {
		t.Fatalf("portal link: %d %v", status, body)
	}
	link := body["data"].(map[string]any)["url"].(string)
	token := link[strings.Index(link, "token=")+len("token="):]
	resp, err := http.Get(strings.Replace(link, link[:strings.Index(link, "/portal/")], st.apiURL, 1))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()

	data := maps.Clone(sampleData["lead.captured"].(map[string]any))
	eventID := st.publish(t, "B", "lead.captured", data)
	eventually(t, 30*time.Second, "the retry delivered", func() bool { return len(st.rc.requests(path)) == 3 })

	secrets := map[string]string{
		"the API key": st.key, "the secret webhookd made": made, "the caller's own secret": own,
		"the portal token": token, "WEBHOOKD_SECRET_KEY": base64.StdEncoding.EncodeToString(testSecretKey),
		"the egress proxy's password":            proxyPassword,
		"the egress proxy's credentials, base64": base64.StdEncoding.EncodeToString([]byte("webhookd:" + proxyPassword)),
	}
	if targets, _ := proxy.seen(); len(targets) == 0 {
		t.Fatal("no delivery went through the egress proxy: its password was never used")
	}
	// The secrets' bodies without their prefix too: a log that strips "whsec_" still leaks.
	for name, s := range map[string]string{"the secret webhookd made": made, "the caller's own secret": own} {
		secrets[name+", bare"] = strings.TrimPrefix(s, "whsec_")
	}
	// check searches text for every secret; known, a string text must hold, proves that the search
	// reads what it claims to (a decoded payload, an answer's body).
	check := func(where, text string, known ...string) {
		t.Helper()
		secretsAbsent(t, where, text, secrets, known...)
	}

	// Give the last attempt's records and spans a moment to land.
	time.Sleep(time.Second)
	check("webhookd's log", st.proc.logs(t), "route=/v2/svc/v2/events")

	resp, err = http.Get(st.apiURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	check("/metrics", string(metrics), "webhookd_filter_skips_total")

	var attempts []struct {
		RequestHeaders *string `bun:"request_headers"`
		ResponseBody   *string `bun:"response_body"`
		Error          *string `bun:"error"`
	}
	if err := st.db.NewSelect().Table("delivery_attempts").Column("request_headers", "response_body", "error").
		Where("delivery_id IN (SELECT id FROM deliveries WHERE event_id = ?)", eventID).Scan(context.Background(), &attempts); err != nil || len(attempts) != 2 {
		t.Fatalf("attempt log: %d rows, %v", len(attempts), err)
	}
	var log strings.Builder
	for _, a := range attempts {
		for _, s := range []*string{a.RequestHeaders, a.ResponseBody, a.Error} {
			if s != nil {
				log.WriteString(*s + "\n")
			}
		}
	}
	check("the attempt log", log.String(), "first attempt refused")

	// The account's delivery log across webhooks and its audit log (issue 46), which records the
	// rotation to the caller's own secret and the portal link made.
	for p, known := range map[string][]string{
		"/v2/svc/v2/deliveries?limit=100": {`"webhookId"`},
		"/v2/svc/v2/audit-log?limit=100":  {`"webhook.secret.rotate"`, `"portal_link.create"`, `"redacted":true`},
	} {
		status, body, _ := st.call(t, "B", "GET", p, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", p, status, body)
		}
		check("the answer of GET "+p, string(mustJSON(t, body)), known...)
	}

	tc := temporaltest.Start(t).Client(t)
	check("the delivery workflow's history", historyText(t, tc, workflows.DeliveryWorkflowID(eventID, hook)), `"EventType":"lead.captured"`)

	var spans strings.Builder
	for _, s := range st.collector.Spans() {
		fmt.Fprintf(&spans, "%s %v %v %v\n", s.Name, s.Attributes, s.Resource, s.Events)
	}
	check("the spans", spans.String(), "RunActivity:Deliver")
}

// historyText is the history of each workflow id, as its events' JSON, followed by the decoded
// bytes of every payload in it (payloads are base64 in the JSON): what a secret search of the
// Temporal histories reads, as 'temporal workflow show' prints them.
func historyText(t *testing.T, tc client.Client, ids ...string) string {
	t.Helper()
	var history strings.Builder
	for _, id := range ids {
		it := tc.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			text := protojson.Format(ev)
			history.WriteString(text)
			for _, m := range payloadData.FindAllStringSubmatch(text, -1) {
				if b, err := base64.StdEncoding.DecodeString(m[1]); err == nil {
					history.Write(b)
				}
			}
		}
	}
	return history.String()
}
