package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:8080" || cfg.DatabaseURL != "sqlite:.data/webhookd.db" || cfg.Temporal.HostPort != "127.0.0.1:7233" ||
		cfg.Temporal.Namespace != "default" || cfg.TaskQueue != "webhookd" || cfg.AllowPrivateTargets || cfg.AllowHTTPTargets ||
		cfg.RateLimit != 20 || cfg.RateBurst != 40 || cfg.DeliveryTimeout != 5*time.Second || cfg.RetryWindow != 7*24*time.Hour ||
		cfg.RetryJitter != 0.1 || cfg.MaxConcurrentRetries != 100 || cfg.HostConcurrency != 16 || cfg.EndpointConcurrency != 4 || cfg.BreakerFailures != 5 ||
		cfg.BreakerCooldown != 10*time.Second || cfg.DisableAfter != 120*time.Hour || cfg.DisableMinExhausted != 5 {
		t.Fatalf("defaults = %+v", cfg)
	}
	want := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}
	if len(cfg.RetrySchedule) != len(want) {
		t.Fatalf("schedule = %v", cfg.RetrySchedule)
	}
	for i := range want {
		if cfg.RetrySchedule[i] != want[i] {
			t.Fatalf("schedule = %v, want %v", cfg.RetrySchedule, want)
		}
	}
}

// TestConfigRefusesBadValues: every malformed value, and an unknown WEBHOOKD_ variable, stops the
// process with a message naming the variable.
func TestConfigRefusesBadValues(t *testing.T) {
	for _, kv := range []string{
		"WEBHOOKD_HTTP_ADDR=8080",
		"WEBHOOKD_DATABASE_URL=mysql://x",
		"TEMPORAL_ADDRESS=nohost",
		"WEBHOOKD_SECRET_KEY=c2hvcnQ=",
		"WEBHOOKD_ALLOW_PRIVATE_TARGETS=maybe",
		"WEBHOOKD_ALLOW_HTTP_TARGETS=2",
		"WEBHOOKD_RATE_LIMIT=-1",
		"WEBHOOKD_RATE_BURST=lots",
		"WEBHOOKD_MAX_WEBHOOKS=0",
		"WEBHOOKD_RETRY_SCHEDULE=1m,soon",
		"WEBHOOKD_RETRY_WINDOW=forever",
		"WEBHOOKD_DELIVERY_TIMEOUT=0s",
		"WEBHOOKD_SMTP_URL=http://mail",
		"WEBHOOKD_MAIL_FROM=not an address",
		"WEBHOOKD_PUBLIC_URL=/relative",
		"WEBHOOKD_LOG_LEVEL=loud",
		"WEBHOOKD_LOG_FORMAT=xml",
		"WEBHOOKD_RETRY_SCHEDUL=1m",
		"WEBHOOKD_RETRY_JITTER=1.5",
		"WEBHOOKD_RETRY_JITTER=-0.1",
		"WEBHOOKD_MAX_CONCURRENT_RETRIES=0",
		"WEBHOOKD_HOST_CONCURRENCY=none",
		"WEBHOOKD_BREAKER_FAILURES=-3",
		"WEBHOOKD_BREAKER_COOLDOWN=10",
		"WEBHOOKD_DISABLE_AFTER=5d",
		"WEBHOOKD_DISABLE_MIN_EXHAUSTED=0",
	} {
		name, _, _ := strings.Cut(kv, "=")
		_, err := loadConfig([]string{kv})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want an error naming %s", kv, err, name)
		}
	}
}

func TestConfigReadsValues(t *testing.T) {
	cfg, err := loadConfig([]string{
		"WEBHOOKD_RETRY_SCHEDULE=2s, 2s,2s", "WEBHOOKD_RATE_LIMIT=5", "WEBHOOKD_ALLOW_PRIVATE_TARGETS=true",
		"WEBHOOKD_SECRET_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "WEBHOOKD_DATABASE_URL=postgres://u@db:5432/w",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.RetrySchedule) != 3 || cfg.RateLimit != 5 || cfg.RateBurst != 10 || !cfg.AllowPrivateTargets || len(cfg.SecretKey) != 32 {
		t.Fatalf("cfg = %+v", cfg)
	}
	cfg, err = loadConfig([]string{"WEBHOOKD_RETRY_JITTER=0", "WEBHOOKD_DISABLE_AFTER=0", "WEBHOOKD_BREAKER_COOLDOWN=2s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetryJitter != 0 || cfg.DisableAfter != 0 || cfg.BreakerCooldown != 2*time.Second {
		t.Fatalf("jitter off, auto-disable off: cfg = %+v", cfg)
	}
	// The host cap follows the slots unless set, and may not take half of them.
	cfg, err = loadConfig([]string{"WEBHOOKD_MAX_CONCURRENT_DELIVERIES=10"})
	if err != nil || cfg.HostConcurrency != 2 {
		t.Fatalf("10 slots: host cap = %d, %v; want 2", cfg.HostConcurrency, err)
	}
	if _, err := loadConfig([]string{"WEBHOOKD_MAX_CONCURRENT_DELIVERIES=10", "WEBHOOKD_HOST_CONCURRENCY=6"}); err == nil || !strings.Contains(err.Error(), "WEBHOOKD_HOST_CONCURRENCY") {
		t.Fatalf("a host cap over half the slots: err = %v", err)
	}
	// The endpoint cap follows the host cap unless set, and may not exceed it.
	if cfg.EndpointConcurrency != 1 {
		t.Fatalf("host cap 2: endpoint cap = %d, want 1", cfg.EndpointConcurrency)
	}
	if cfg, err = loadConfig([]string{"WEBHOOKD_HOST_CONCURRENCY=20", "WEBHOOKD_ENDPOINT_CONCURRENCY=20"}); err != nil || cfg.EndpointConcurrency != 20 {
		t.Fatalf("endpoint cap = host cap: %d, %v", cfg.EndpointConcurrency, err)
	}
	if _, err := loadConfig([]string{"WEBHOOKD_HOST_CONCURRENCY=8", "WEBHOOKD_ENDPOINT_CONCURRENCY=9"}); err == nil || !strings.Contains(err.Error(), "WEBHOOKD_ENDPOINT_CONCURRENCY") {
		t.Fatalf("an endpoint cap over the host cap: err = %v", err)
	}
}

// TestSecretKeyRules: SQLite without a key generates one once and reuses it; PostgreSQL without a
// key is refused, since replicas would not share a generated key.
func TestSecretKeyRules(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"WEBHOOKD_DATA_DIR=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	k1, err := cfg.secretKey()
	if err != nil || len(k1) != 32 {
		t.Fatalf("generated key = %d bytes, %v", len(k1), err)
	}
	k2, err := cfg.secretKey()
	if err != nil || string(k1) != string(k2) {
		t.Fatal("the generated key is not reused")
	}
	pg, err := loadConfig([]string{"WEBHOOKD_DATABASE_URL=postgres://u@db/w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.secretKey(); err == nil || !strings.Contains(err.Error(), "WEBHOOKD_SECRET_KEY") {
		t.Fatalf("PostgreSQL without a key: %v", err)
	}
}

// TestConfigTemporalConnection: the Temporal connection loads as the Temporal CLI loads it, a
// temporal.toml profile overridden by TEMPORAL_* variables.
func TestConfigTemporalConnection(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.toml")
	toml := `
[profile.cloud]
address = "webhookd.a1b2c.tmprl.cloud:7233"
namespace = "webhookd.a1b2c"
api_key = "profile-key"

[profile.cloud.tls]
server_name = "webhookd.a1b2c.tmprl.cloud"
`
	if err := os.WriteFile(file, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=cloud", "TEMPORAL_NAMESPACE=override"})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Temporal
	if o.HostPort != "webhookd.a1b2c.tmprl.cloud:7233" || o.Namespace != "override" || o.Credentials == nil ||
		o.ConnectionOptions.TLS == nil || o.ConnectionOptions.TLS.ServerName != "webhookd.a1b2c.tmprl.cloud" {
		t.Fatalf("options = %+v", o)
	}

	// A profile that is not in the file is an error, not a silent dev-server default.
	_, err = loadConfig([]string{"TEMPORAL_CONFIG_FILE=" + file, "TEMPORAL_PROFILE=prod"})
	if err == nil || !strings.Contains(err.Error(), "prod") {
		t.Fatalf("missing profile: err = %v", err)
	}
	// A certificate that is not there names the problem.
	_, err = loadConfig([]string{"TEMPORAL_TLS_CLIENT_CERT_PATH=/nonexistent/client.pem", "TEMPORAL_TLS_CLIENT_KEY_PATH=/nonexistent/client.key"})
	if err == nil || !strings.Contains(err.Error(), "client.pem") {
		t.Fatalf("missing certificate: err = %v", err)
	}
}

// TestConfigSQLiteFollowsDataDir: the development database is one of the development files, so a
// stack with a data dir of its own (a second `make run`, a test) does not share another's database,
// whose secrets its key cannot open.
func TestConfigSQLiteFollowsDataDir(t *testing.T) {
	cfg, err := loadConfig([]string{"WEBHOOKD_DATA_DIR=/tmp/other"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseURL != "sqlite:/tmp/other/webhookd.db" {
		t.Fatalf("database = %q, want sqlite:/tmp/other/webhookd.db", cfg.DatabaseURL)
	}
	cfg, err = loadConfig([]string{"WEBHOOKD_DATA_DIR=/tmp/other", "WEBHOOKD_DATABASE_URL=sqlite:/srv/hooks.db"})
	if err != nil || cfg.DatabaseURL != "sqlite:/srv/hooks.db" {
		t.Fatalf("an explicit database: %q, %v", cfg.DatabaseURL, err)
	}
}

// TestConfigRefusalsSayWhatIsWanted: a value that does not parse as its type, or parses but is out
// of range, stops the process with the variable, the value (unless it may hold a credential) and
// what the value must be. Integers are integers: 1.5 is not rounded down.
func TestConfigRefusalsSayWhatIsWanted(t *testing.T) {
	for _, c := range []struct{ kv, want string }{
		{"WEBHOOKD_MAX_WEBHOOKS=1.5", `WEBHOOKD_MAX_WEBHOOKS: "1.5" is not a positive integer`},
		{"WEBHOOKD_MAX_WEBHOOKS=0", `WEBHOOKD_MAX_WEBHOOKS: "0" is not a positive integer`},
		{"WEBHOOKD_RATE_BURST=2.5", `WEBHOOKD_RATE_BURST: "2.5" is not a positive integer`},
		{"WEBHOOKD_RATE_BURST=0", `WEBHOOKD_RATE_BURST: "0" is not a positive integer`},
		{"WEBHOOKD_MAX_CONCURRENT_DELIVERIES=1e3", `WEBHOOKD_MAX_CONCURRENT_DELIVERIES: "1e3" is not a positive integer`},
		{"WEBHOOKD_WORKFLOW_CACHE_SIZE=-1", `WEBHOOKD_WORKFLOW_CACHE_SIZE: "-1" is not a positive integer`},
		{"WEBHOOKD_ENDPOINT_CONCURRENCY=0", `WEBHOOKD_ENDPOINT_CONCURRENCY: "0" is not a positive integer`},
		{"WEBHOOKD_RATE_LIMIT=0", `WEBHOOKD_RATE_LIMIT: "0" is not a positive number`},
		{"WEBHOOKD_RATE_LIMIT=NaN", `WEBHOOKD_RATE_LIMIT: "NaN" is not a positive number`},
		{"WEBHOOKD_DELIVERY_TIMEOUT=5x", `WEBHOOKD_DELIVERY_TIMEOUT: "5x" is not a positive duration such as 5s or 1h`},
		{"WEBHOOKD_SWEEP_INTERVAL=-5s", `WEBHOOKD_SWEEP_INTERVAL: "-5s" is not a positive duration such as 5s or 1h`},
		{"WEBHOOKD_BREAKER_COOLDOWN=10", `WEBHOOKD_BREAKER_COOLDOWN: "10" is not a positive duration such as 5s or 1h`},
		{"WEBHOOKD_DISABLE_AFTER=5d", `WEBHOOKD_DISABLE_AFTER: "5d" is not 0 or a positive duration such as 120h`},
		{"WEBHOOKD_RETENTION=-1h", `WEBHOOKD_RETENTION: "-1h" is not 0 or a positive duration such as 120h`},
		{"WEBHOOKD_RETRY_SCHEDULE=1m,,5m", `WEBHOOKD_RETRY_SCHEDULE: "1m,,5m" is not a list of positive durations such as 1m,5m,15m,1h,6h`},
		{"WEBHOOKD_RETRY_SCHEDULE=1m,0s", `WEBHOOKD_RETRY_SCHEDULE: "1m,0s" is not a list of positive durations such as 1m,5m,15m,1h,6h`},
		{"WEBHOOKD_RETRY_JITTER=1.5", `WEBHOOKD_RETRY_JITTER: "1.5" is not a fraction from 0 to 1 (0.1 adds up to 10%)`},
		{"WEBHOOKD_ALLOW_HTTP_TARGETS=yes", `WEBHOOKD_ALLOW_HTTP_TARGETS: "yes" is not true or false`},
		{"WEBHOOKD_LOG_LEVEL=loud", `WEBHOOKD_LOG_LEVEL: "loud" is not debug, info, warn or error`},
		{"WEBHOOKD_LOG_FORMAT=xml", `WEBHOOKD_LOG_FORMAT: "xml" is not text or json`},
		{"WEBHOOKD_HTTP_ADDR=8080", `WEBHOOKD_HTTP_ADDR: "8080" is not a host:port such as 127.0.0.1:8080`},
		{"WEBHOOKD_TEMPORAL_UI_URL=127.0.0.1:8233", `WEBHOOKD_TEMPORAL_UI_URL: "127.0.0.1:8233" is not an absolute URL`},
		{"WEBHOOKD_SITE_BASE_URL=sites.example.com", `WEBHOOKD_SITE_BASE_URL: "sites.example.com" is not an absolute URL`},
		{"WEBHOOKD_MAIL_FROM=webhookd", `WEBHOOKD_MAIL_FROM: "webhookd" is not an e-mail address`},
		// These may hold a password: the message does not repeat them.
		{"WEBHOOKD_DATABASE_URL=mysql://u:hunter2@db/w", "WEBHOOKD_DATABASE_URL: must be a URL starting with sqlite: or postgres://"},
		{"WEBHOOKD_SMTP_URL=http://u:hunter2@mail", "WEBHOOKD_SMTP_URL: must be a URL such as smtp://user:pass@host:587"},
		{"WEBHOOKD_SECRET_KEY=aHVudGVyMg==", "WEBHOOKD_SECRET_KEY: must be the base64 encoding of exactly 32 bytes (openssl rand -base64 32)"},
		{"WEBHOOKD_SECRET_KEY=hunter2", "WEBHOOKD_SECRET_KEY: must be the base64 encoding of exactly 32 bytes (openssl rand -base64 32)"},
		{"WEBHOOKD_EGRESS_PROXY=socks5://u:hunter2@proxy:1080", "WEBHOOKD_EGRESS_PROXY: must be an http:// or https:// proxy URL such as http://user:pass@proxy:3128"},
		{"WEBHOOKD_EGRESS_PROXY=u:hunter2@proxy:3128", "WEBHOOKD_EGRESS_PROXY: must be an http:// or https:// proxy URL such as http://user:pass@proxy:3128"},
		{"WEBHOOKD_EGRESS_PROXY=http://u:hunter2@proxy:3128/path", "WEBHOOKD_EGRESS_PROXY: must be an http:// or https:// proxy URL such as http://user:pass@proxy:3128"},
		{"WEBHOOKD_EGRESS_PROXY=http://u:hunter2@:3128", "WEBHOOKD_EGRESS_PROXY: must be an http:// or https:// proxy URL such as http://user:pass@proxy:3128"},
	} {
		_, err := loadConfig([]string{c.kv})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v, want %s", c.kv, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg")) {
			t.Errorf("%s: the message repeats a credential: %v", c.kv, err)
		}
	}
	// Every refusal at once, each on its own line.
	_, err := loadConfig([]string{"WEBHOOKD_MAX_WEBHOOKS=1.5", "WEBHOOKD_DELIVERY_TIMEOUT=5x", "WEBHOOKD_RETRY_SCHEDUL=1m"})
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("three mistakes: err = %v, want three lines", err)
	}
	// An empty value is no value: the default.
	cfg, err := loadConfig([]string{"WEBHOOKD_MAX_WEBHOOKS=", "WEBHOOKD_RATE_BURST=", "WEBHOOKD_LOG_FORMAT="})
	if err != nil || cfg.MaxWebhooks != 100 || cfg.RateBurst != 40 || cfg.LogFormat != "text" {
		t.Fatalf("empty values: %+v, %v", cfg, err)
	}
}

// TestConfigEgressProxy: the proxy URL is read with its credentials, and printed without them.
func TestConfigEgressProxy(t *testing.T) {
	cfg, err := loadConfig([]string{"WEBHOOKD_EGRESS_PROXY=https://webhookd:hunter2@proxy.example.com:3128"})
	if err != nil {
		t.Fatal(err)
	}
	u, err := cfg.EgressProxy.URL()
	if err != nil || u.Host != "proxy.example.com:3128" || u.User.Username() != "webhookd" {
		t.Fatalf("proxy = %v, %v", u, err)
	}
	if pass, _ := u.User.Password(); pass != "hunter2" {
		t.Fatalf("password = %q", pass)
	}
	for _, printed := range []string{fmt.Sprint(cfg.EgressProxy), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(printed, "hunter2") {
			t.Errorf("the printed config holds the proxy's password: %s", printed)
		}
	}
	if got := cfg.EgressProxy.String(); got != "https://webhookd:xxxxx@proxy.example.com:3128" {
		t.Errorf("String() = %q", got)
	}
	if cfg, err := loadConfig(nil); err != nil || cfg.EgressProxy != "" {
		t.Fatalf("unset: %q, %v", cfg.EgressProxy, err)
	}
}

// TestConfigDocumented: docs/configuration.md's table names exactly the variables of Config, in its
// order, each with its default: the envDefault tag's, in backquotes, or for a default that follows
// from other variables, words and the value it comes to with theirs.
func TestConfigDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n| variable | default | meaning |\n|---|---|---|\n")
	if !ok {
		t.Fatal("docs/configuration.md: no | variable | default | meaning | table")
	}
	var rows [][]string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| \n"), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/configuration.md: not three cells: %s", line)
		}
		rows = append(rows, cells)
	}

	defaults, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		j := slices.IndexFunc(rows, func(r []string) bool { return r[0] == "`"+name+"`" })
		if j < 0 {
			t.Errorf("%s (Config.%s) is not in docs/configuration.md", name, f.Name)
			continue
		}
		cell := rows[j][1]
		if def, ok := f.Tag.Lookup("envDefault"); ok {
			if want := "`" + def + "`"; cell != want && !strings.HasPrefix(cell, want+" (") {
				t.Errorf("%s: documented default %s, want %s (its envDefault), optionally followed by a note in parentheses", name, cell, want)
			}
			continue
		}
		if strings.HasPrefix(cell, "`") {
			t.Errorf("%s: documented default %s, but Config.%s has no envDefault: say how the default follows from others", name, cell, f.Name)
		}
		if v := reflect.ValueOf(defaults).Field(i); !v.IsZero() {
			if want := fmt.Sprintf("(`%v`)", v.Interface()); !strings.Contains(cell, want) {
				t.Errorf("%s: documented default %s, want it to say what it comes to: %s", name, cell, want)
			}
		}
	}
	var documented []string
	for _, r := range rows {
		documented = append(documented, strings.Trim(r[0], "`"))
	}
	if !slices.Equal(documented, names) {
		t.Errorf("docs/configuration.md lists\n%v\nConfig declares, in this order,\n%v", documented, names)
	}
	for _, name := range testVariables {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/configuration.md does not say what %s is", name)
		}
	}
}

// TestKnownVariablesAreConfigs: the variables a process accepts are the Config fields' (as the env
// package reads their tags), the test suite's and the client commands' (listen), no more, and each
// may be set empty.
func TestKnownVariablesAreConfigs(t *testing.T) {
	known, err := knownVariables()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		if name, _, _ := strings.Cut(ct.Field(i).Tag.Get("env"), ","); strings.HasPrefix(name, "WEBHOOKD_") {
			want = append(want, name)
		}
	}
	if want = append(append(want, testVariables...), clientVariables...); len(want) < 30 || !slices.Equal(known, want) {
		t.Fatalf("known = %v, want %v", known, want)
	}
	for _, name := range known {
		if _, err := loadConfig([]string{name + "="}); err != nil {
			t.Errorf("%s= refused: %v", name, err)
		}
	}
}

// TestConfigTracing: tracing is off unless the OTEL_* variables name an exporter or an endpoint,
// and an exporter webhookd does not carry stops the process at start, with the variable named.
func TestConfigTracing(t *testing.T) {
	cfg, err := loadConfig(nil)
	if err != nil || cfg.Tracing.On {
		t.Fatalf("no OTEL_*: tracing %+v, %v; want off", cfg.Tracing, err)
	}
	cfg, err = loadConfig([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"})
	if err != nil || !cfg.Tracing.On || cfg.Tracing.Protocol != "http/protobuf" {
		t.Fatalf("an endpoint: tracing %+v, %v; want on over http/protobuf", cfg.Tracing, err)
	}
	if _, err := loadConfig([]string{"OTEL_TRACES_EXPORTER=zipkin"}); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("OTEL_TRACES_EXPORTER=zipkin: err = %v, want one naming the variable", err)
	}
}
