//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestDashboardAndAlertsUseRealMetrics runs the real binary (`serve --role all`) on a real Temporal
// dev server and PostgreSQL, sends real traffic through it (a delivered event, a failing one that
// is retried until exhausted, an API error), scrapes its /metrics page, and checks that every
// metric the Grafana dashboard and the Prometheus alerts query exists there, and that the Temporal
// SDK's series carry their labels.
func TestDashboardAndAlertsUseRealMetrics(t *testing.T) {
	bin := webhookdBinary(t)
	ts := temporaltest.Start(t)
	dbURL := dbtest.PostgresURL(t)
	rc := startReceiver(t)
	rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	db := openTestDB(t, dbURL)

	addr := freeAddr(t)
	queue := fmt.Sprintf("scrape-%d", time.Now().UnixNano())
	cmd := exec.Command(bin, "serve", "--role", "all")
	// The binary refuses WEBHOOKD_ variables it does not know, such as the tests' own.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "WEBHOOKD_") })
	cmd.Env = append(env,
		"WEBHOOKD_DATABASE_URL="+dbURL,
		"WEBHOOKD_HTTP_ADDR="+addr,
		"TEMPORAL_ADDRESS="+ts.Address,
		"TEMPORAL_NAMESPACE="+ts.Namespace,
		"WEBHOOKD_TASK_QUEUE="+queue,
		"WEBHOOKD_SECRET_KEY="+base64.StdEncoding.EncodeToString(testSecretKey),
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_EXTRA_CA_FILE="+rc.caFile,
		"WEBHOOKD_RETRY_SCHEDULE=1s,1s",
		"WEBHOOKD_RETRY_JITTER=0",
		"WEBHOOKD_SWEEP_INTERVAL=500ms",
		"WEBHOOKD_DATA_DIR="+t.TempDir(),
	)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("webhookd output:\n%s", logs)
		}
	})
	eventually(t, 60*time.Second, "webhookd up", func() bool {
		select {
		case <-exited:
			t.Fatalf("webhookd exited before it was up")
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	key, _, err := model.CreateAPIKey(context.Background(), db, "scrape@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{apiURL: "http://" + addr, key: key, db: db, rc: rc}
	okID, _ := st.createWebhook(t, "A", rc.url("/ok"), "campaign.created")
	failID, _ := st.createWebhook(t, "A", rc.url("/fail"), "campaign.created")
	eventID := st.publish(t, "A", "campaign.created", campaign)
	if status, body, _ := st.call(t, "A", "GET", collection("A")+"/webhooks/999999999999", nil); status != http.StatusNotFound {
		t.Fatalf("GET a missing webhook: %d %v, want 404", status, body)
	}
	eventually(t, 60*time.Second, "one delivery delivered, the other exhausted after its retries", func() bool {
		return st.delivery(t, eventID, okID).State == model.DeliveryDelivered &&
			st.delivery(t, eventID, failID).State == model.DeliveryExhausted
	})
	if n := len(rc.requests("/fail")); n != 3 {
		t.Fatalf("failing receiver got %d attempts, want 3 (a first attempt and two retries)", n)
	}

	families := scrape(t, "http://"+addr+"/metrics")
	// WEBHOOKD_TEST_SCRAPE_OUT=file writes every series name and label set of the page there, to
	// see what a dashboard panel or an alert can use.
	if path := os.Getenv("WEBHOOKD_TEST_SCRAPE_OUT"); path != "" {
		dumpFamilies(t, path, families)
	}

	// The traffic shows on the page.
	for _, want := range []struct {
		family string
		labels map[string]string
	}{
		{"webhookd_deliveries_total", map[string]string{"outcome": "delivered"}},
		{"webhookd_deliveries_total", map[string]string{"outcome": "http_status"}},
		{"webhookd_deliveries_exhausted_total", nil},
		{"webhookd_http_requests_total", map[string]string{"code": "404", "route": "/api/svc/v2/webhooks/:id"}},
	} {
		if sum := sumOf(families[want.family], want.labels); sum < 1 {
			t.Errorf("%s%v = %v, want at least 1", want.family, want.labels, sum)
		}
	}

	// Every metric the dashboard and the alerts query is on the page.
	used := map[string][]string{}
	for _, expr := range dashboardExprs(t) {
		for _, name := range metricNames(expr) {
			used[name] = append(used[name], "deployments/grafana/webhookd.json: "+expr)
		}
	}
	for _, expr := range alertExprs(t) {
		for _, name := range metricNames(expr) {
			used[name] = append(used[name], "deployments/prometheus/alerts.yml: "+expr)
		}
	}
	if len(used) < 10 {
		t.Fatalf("only %d metric names found in the dashboard and the alerts: %v", len(used), used)
	}
	for name, where := range used {
		if name == "up" { // Prometheus's own series of every scrape target
			continue
		}
		if !exposes(families, name) {
			t.Errorf("%s is not on webhookd's /metrics page; used in:\n  %s", name, strings.Join(where, "\n  "))
		}
	}

	// The SDK's series keep their labels.
	for _, want := range []struct {
		family string
		labels map[string]string
	}{
		// The first attempt is a local activity on the main queue; retries are activities on the
		// retry queue, and the failed delivery's MarkExhausted an activity on the main queue.
		{"temporal_local_activity_execution_latency_seconds", map[string]string{"task_queue": queue, "activity_type": "Deliver", "workflow_type": "DeliveryWorkflow"}},
		{"temporal_activity_schedule_to_start_latency_seconds", map[string]string{"task_queue": queue, "activity_type": "MarkExhausted", "namespace": ts.Namespace}},
		{"temporal_activity_schedule_to_start_latency_seconds", map[string]string{"task_queue": queue + "-retry", "activity_type": "Deliver"}},
		{"temporal_workflow_task_schedule_to_start_latency_seconds", map[string]string{"task_queue": queue, "workflow_type": "DeliveryWorkflow"}},
		{"temporal_worker_task_slots_available", map[string]string{"task_queue": queue, "worker_type": "ActivityWorker"}},
		{"temporal_worker_task_slots_available", map[string]string{"task_queue": queue, "worker_type": "LocalActivityWorker"}},
		{"temporal_worker_task_slots_used", map[string]string{"task_queue": queue, "worker_type": "WorkflowWorker"}},
		{"temporal_activity_execution_latency_seconds", map[string]string{"task_queue": queue + "-retry", "activity_type": "Deliver"}},
	} {
		if !hasSeries(families[want.family], want.labels) {
			t.Errorf("no %s series with labels %v; the page has:\n%s", want.family, want.labels, seriesOf(families[want.family]))
		}
	}
}

// scrape reads and parses a Prometheus text exposition page.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(promodel.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// exposes reports whether the page has name, a histogram's or summary's _bucket, _sum or _count
// series counting as its family's.
func exposes(families map[string]*dto.MetricFamily, name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := families[base]
		if ok && (f.GetType() == dto.MetricType_HISTOGRAM || suffix != "_bucket" && f.GetType() == dto.MetricType_SUMMARY) {
			return true
		}
	}
	return false
}

// sumOf adds up the counters and gauges of f whose labels include labels.
func sumOf(f *dto.MetricFamily, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range f.GetMetric() {
		if hasSeries(&dto.MetricFamily{Metric: []*dto.Metric{m}}, labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasSeries(f *dto.MetricFamily, labels map[string]string) bool {
	for _, m := range f.GetMetric() {
		matched := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				matched++
			}
		}
		if matched == len(labels) {
			return true
		}
	}
	return false
}

func seriesOf(f *dto.MetricFamily) string {
	var out []string
	for _, m := range f.GetMetric() {
		out = append(out, "  "+f.GetName()+"{"+labelString(m)+"}")
	}
	return strings.Join(out, "\n")
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func dumpFamilies(t *testing.T, path string, families map[string]*dto.MetricFamily) {
	t.Helper()
	var lines []string
	for _, f := range families {
		lines = append(lines, fmt.Sprintf("# %s %s", f.GetName(), f.GetType()))
		lines = append(lines, seriesOf(f))
	}
	slices.Sort(lines)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dashboardExprs returns every PromQL expression of the Grafana dashboard: its panels' targets and
// its query variables.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deployments", "grafana", "webhookd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deployments/grafana/webhookd.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			if target.Expr != "" {
				exprs = append(exprs, target.Expr)
			}
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		switch q := v.Query.(type) {
		case string:
			exprs = append(exprs, q)
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		}
	}
	return exprs
}

// alertExprs returns the expr of every rule in the Prometheus rules file.
func alertExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "deployments", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("deployments/prometheus/alerts.yml: %v", err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

var (
	// Removed before looking for names: strings (label values, regexps), label matchers, range and
	// subquery brackets, and the label lists of by, without, on, ignoring, group_left and
	// group_right.
	promqlString  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlBraces  = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRange   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promqlGroup   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlNumber  = regexp.MustCompile(`(^|[^A-Za-z0-9_:$])(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)[smhdwy]?`)
	promqlVar     = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	promqlIdent   = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValuesOf = regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{[^}]*\})?\s*,`)
	promqlWords   = map[string]bool{
		// aggregation operators
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
		// binary operators and modifiers
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		// literals
		"inf": true, "nan": true, "Inf": true, "NaN": true,
	}
)

// metricNames returns the metric names an expression selects: the identifiers that are neither
// functions (followed by a parenthesis), keywords, label names nor values. A Grafana variable
// query label_values(metric, label) names its first argument.
func metricNames(expr string) []string {
	if m := labelValuesOf.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	s := promqlString.ReplaceAllString(expr, " ")
	s = promqlVar.ReplaceAllString(s, " ")
	for prev := ""; prev != s; {
		prev = s
		s = promqlBraces.ReplaceAllString(s, " ")
	}
	s = promqlRange.ReplaceAllString(s, " ")
	s = promqlGroup.ReplaceAllString(s, " ")
	s = promqlNumber.ReplaceAllString(s, "$1 ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if promqlWords[name] || strings.HasPrefix(rest, "(") {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// TestMetricNames: the expression parser of TestDashboardAndAlertsUseRealMetrics finds metric
// names and nothing else.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="webhookd"} == 0`, []string{"up"}},
		{`sum(rate(webhookd_deliveries_total{outcome!="delivered"}[10m])) / clamp_min(sum(rate(webhookd_deliveries_total[10m])), 1e-9) > 0.5`,
			[]string{"webhookd_deliveries_total"}},
		{`histogram_quantile(0.95, sum by (le, outcome) (rate(webhookd_delivery_attempt_duration_seconds_bucket{variant=~"$variant"}[$__rate_interval])))`,
			[]string{"webhookd_delivery_attempt_duration_seconds_bucket"}},
		{`min by (instance) (webhookd_dependency_up{dependency="temporal"}) == 0`, []string{"webhookd_dependency_up"}},
		{"sum without (worker_type) (temporal_worker_task_slots_used{task_queue=~\"${task_queue}\"})\n  / on (instance) group_left (pod)\n  (temporal_worker_task_slots_available + temporal_worker_task_slots_used)",
			[]string{"temporal_worker_task_slots_used", "temporal_worker_task_slots_available"}},
		{`increase(webhookd_delivery_internal_failures_total[15m]) > 0 and on() vector(1)`, []string{"webhookd_delivery_internal_failures_total"}},
		{`deriv(sum(webhookd_webhooks{status=~"failed|failing"})[30m:1m]) * 3600 > 2`, []string{"webhookd_webhooks"}},
		{`sum(rate(a_total[5m] offset 1h)) by (code) / ignoring(code) group_left sum(rate(b_total[5m])) > bool 0x1F`, []string{"a_total", "b_total"}},
		{`label_values(temporal_worker_task_slots_available{namespace="default"}, task_queue)`, []string{"temporal_worker_task_slots_available"}},
		{`{__name__="x"}`, nil},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}
