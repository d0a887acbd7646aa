package main

import (
	"os"
	"path/filepath"
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
