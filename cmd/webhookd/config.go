package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// Config is the whole process configuration, read once from the environment in main and passed
// down in parts. The variable names are a contract with operators and tests.
type Config struct {
	HTTPAddr string
	// DebugAddr, when set, serves net/http/pprof there: off by default, and meant for loopback.
	DebugAddr   string
	DatabaseURL string
	DataDir     string
	// Temporal is the client configuration, loaded as the Temporal CLI and SDKs load it (see
	// temporalOptions); serve adds the logger and metrics.
	Temporal            client.Options
	TaskQueue           string
	SecretKey           []byte
	AllowPrivateTargets bool
	AllowHTTPTargets    bool
	RateLimit           float64
	RateBurst           int
	MaxWebhooks         int64
	LogLevel            slog.Level
	LogJSON             bool

	RetrySchedule   []time.Duration
	RetryWindow     time.Duration
	DeliveryTimeout time.Duration
	ExtraCAFile     string
	SMTPURL         string
	MailFrom        string
	PublicURL       string
	TemporalUIURL   string
	SiteBaseURL     string
	SweepInterval   time.Duration
	// MaxConcurrentDeliveries bounds concurrent first attempts per worker process, and
	// MaxConcurrentRetries the later attempts, which have their own task queue.
	MaxConcurrentDeliveries int
	MaxConcurrentRetries    int
	// WorkflowCacheSize is how many workflows a worker process keeps in memory between their
	// tasks (the SDK's sticky cache). A delivery waiting on a retry timer needs none: evicted, it
	// replays its short history when the timer fires.
	WorkflowCacheSize int
	// RetryJitter is the largest fraction added to each retry delay.
	RetryJitter float64
	// HostConcurrency caps one receiver host's attempts in flight per worker process, and
	// EndpointConcurrency one endpoint's (a webhook's URL) unless the webhook sets maxInFlight;
	// BreakerFailures failures in a row open an endpoint's breaker (timeouts, broken connections)
	// or a host's (refused connections, DNS, TLS) for BreakerCooldown.
	HostConcurrency     int
	EndpointConcurrency int
	BreakerFailures     int
	BreakerCooldown     time.Duration
	// DisableAfter is how long a webhook may fail without a success before it is disabled (zero:
	// never), once at least DisableMinExhausted of its deliveries were exhausted.
	DisableAfter        time.Duration
	DisableMinExhausted int
	// Retention is how long events, deliveries and attempts are kept once finished (zero: forever).
	Retention time.Duration
}

// knownVariables lists every WEBHOOKD_ variable; any other is a typo and stops the process.
var knownVariables = []string{
	"WEBHOOKD_HTTP_ADDR", "WEBHOOKD_DEBUG_ADDR", "WEBHOOKD_DATABASE_URL", "WEBHOOKD_DATA_DIR", "WEBHOOKD_TASK_QUEUE",
	"WEBHOOKD_SECRET_KEY", "WEBHOOKD_ALLOW_PRIVATE_TARGETS", "WEBHOOKD_ALLOW_HTTP_TARGETS",
	"WEBHOOKD_RATE_LIMIT", "WEBHOOKD_RATE_BURST", "WEBHOOKD_MAX_WEBHOOKS", "WEBHOOKD_LOG_LEVEL",
	"WEBHOOKD_LOG_FORMAT", "WEBHOOKD_RETRY_SCHEDULE", "WEBHOOKD_RETRY_WINDOW", "WEBHOOKD_DELIVERY_TIMEOUT",
	"WEBHOOKD_EXTRA_CA_FILE", "WEBHOOKD_SMTP_URL", "WEBHOOKD_MAIL_FROM", "WEBHOOKD_PUBLIC_URL",
	"WEBHOOKD_TEMPORAL_UI_URL", "WEBHOOKD_SITE_BASE_URL", "WEBHOOKD_SWEEP_INTERVAL", "WEBHOOKD_MAX_CONCURRENT_DELIVERIES",
	"WEBHOOKD_MAX_CONCURRENT_RETRIES", "WEBHOOKD_WORKFLOW_CACHE_SIZE", "WEBHOOKD_RETRY_JITTER", "WEBHOOKD_HOST_CONCURRENCY", "WEBHOOKD_ENDPOINT_CONCURRENCY", "WEBHOOKD_BREAKER_FAILURES",
	"WEBHOOKD_BREAKER_COOLDOWN", "WEBHOOKD_DISABLE_AFTER", "WEBHOOKD_DISABLE_MIN_EXHAUSTED", "WEBHOOKD_RETENTION",
	// Read by the test suite, not by the service; allowed so a test shell can run the binary.
	"WEBHOOKD_TEST_DATABASE_URL", "WEBHOOKD_TEST_LOG", "WEBHOOKD_SCREENSHOTS",
}

// loadConfig reads the configuration from environ (os.Environ form). Every malformed value is an
// error naming its variable.
func loadConfig(environ []string) (Config, error) {
	env := map[string]string{}
	var errs []error
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if strings.HasPrefix(k, "WEBHOOKD_") && !slices.Contains(knownVariables, k) {
			errs = append(errs, fmt.Errorf("%s: unknown variable (known: %s)", k, strings.Join(knownVariables, ", ")))
		}
	}
	get := func(k, def string) string {
		if v, ok := env[k]; ok && v != "" {
			return v
		}
		return def
	}
	boolean := func(k string) bool {
		v := get(k, "false")
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not true or false", k, v))
		}
		return b
	}
	cfg := Config{
		HTTPAddr:            get("WEBHOOKD_HTTP_ADDR", "127.0.0.1:8080"),
		DebugAddr:           get("WEBHOOKD_DEBUG_ADDR", ""),
		DataDir:             get("WEBHOOKD_DATA_DIR", ".data"),
		TaskQueue:           get("WEBHOOKD_TASK_QUEUE", "webhookd"),
		AllowPrivateTargets: boolean("WEBHOOKD_ALLOW_PRIVATE_TARGETS"),
		AllowHTTPTargets:    boolean("WEBHOOKD_ALLOW_HTTP_TARGETS"),
	}
	// The development database lives with the other development files, so a stack started with its
	// own data dir (the tests, a second `make run`) has its own database too.
	cfg.DatabaseURL = get("WEBHOOKD_DATABASE_URL", "sqlite:"+filepath.Join(cfg.DataDir, "webhookd.db"))
	if !strings.HasPrefix(cfg.DatabaseURL, "sqlite:") && !strings.HasPrefix(cfg.DatabaseURL, "postgres://") && !strings.HasPrefix(cfg.DatabaseURL, "postgresql://") {
		errs = append(errs, errors.New("WEBHOOKD_DATABASE_URL: must start with sqlite: or postgres://"))
	}
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("WEBHOOKD_HTTP_ADDR: %w", err))
	}
	if opts, err := temporalOptions(env); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Temporal = opts
	}

	positive := func(k, def string) float64 {
		v := get(k, def)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive number", k, v))
		}
		return f
	}
	cfg.RateLimit = positive("WEBHOOKD_RATE_LIMIT", "20")
	cfg.RateBurst = int(positive("WEBHOOKD_RATE_BURST", strconv.Itoa(int(math.Ceil(2*cfg.RateLimit)))))
	cfg.MaxWebhooks = int64(positive("WEBHOOKD_MAX_WEBHOOKS", "100"))
	if v := get("WEBHOOKD_LOG_LEVEL", "info"); cfg.LogLevel.UnmarshalText([]byte(v)) != nil {
		errs = append(errs, fmt.Errorf("WEBHOOKD_LOG_LEVEL: %q is not debug, info, warn or error", v))
	}
	switch v := get("WEBHOOKD_LOG_FORMAT", "text"); v {
	case "text":
	case "json":
		cfg.LogJSON = true
	default:
		errs = append(errs, fmt.Errorf("WEBHOOKD_LOG_FORMAT: %q is not text or json", v))
	}
	duration := func(k, def string) time.Duration {
		v := get(k, def)
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive duration such as 5s or 1h", k, v))
		}
		return d
	}
	for _, part := range strings.Split(get("WEBHOOKD_RETRY_SCHEDULE", "1m,5m,15m,1h,6h"), ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("WEBHOOKD_RETRY_SCHEDULE: %q is not a positive duration (want a list such as 1m,5m,15m,1h,6h)", part))
			continue
		}
		cfg.RetrySchedule = append(cfg.RetrySchedule, d)
	}
	cfg.RetryWindow = duration("WEBHOOKD_RETRY_WINDOW", "168h")
	cfg.DeliveryTimeout = duration("WEBHOOKD_DELIVERY_TIMEOUT", "5s")
	cfg.SweepInterval = duration("WEBHOOKD_SWEEP_INTERVAL", "5s")
	cfg.MaxConcurrentDeliveries = int(positive("WEBHOOKD_MAX_CONCURRENT_DELIVERIES", "200"))
	cfg.MaxConcurrentRetries = int(positive("WEBHOOKD_MAX_CONCURRENT_RETRIES", "100"))
	cfg.WorkflowCacheSize = int(positive("WEBHOOKD_WORKFLOW_CACHE_SIZE", "1000"))
	// A receiver host may hold a small share of the first-attempt slots (16 of the default 200),
	// or isolation is gone: a cap of half the slots or more is refused.
	cfg.HostConcurrency = int(positive("WEBHOOKD_HOST_CONCURRENCY", strconv.Itoa(max(2, cfg.MaxConcurrentDeliveries/12))))
	if cfg.MaxConcurrentDeliveries > 0 && cfg.HostConcurrency > cfg.MaxConcurrentDeliveries/2 {
		errs = append(errs, fmt.Errorf("WEBHOOKD_HOST_CONCURRENCY: %d is more than half of WEBHOOKD_MAX_CONCURRENT_DELIVERIES (%d): one receiver host could take the worker's slots",
			cfg.HostConcurrency, cfg.MaxConcurrentDeliveries))
	}
	// No single endpoint may take more than a quarter of its host's slots unless its webhook says.
	cfg.EndpointConcurrency = int(positive("WEBHOOKD_ENDPOINT_CONCURRENCY", strconv.Itoa(max(1, cfg.HostConcurrency/4))))
	if cfg.EndpointConcurrency > cfg.HostConcurrency {
		errs = append(errs, fmt.Errorf("WEBHOOKD_ENDPOINT_CONCURRENCY: %d is more than WEBHOOKD_HOST_CONCURRENCY (%d)", cfg.EndpointConcurrency, cfg.HostConcurrency))
	}
	cfg.BreakerFailures = int(positive("WEBHOOKD_BREAKER_FAILURES", "5"))
	cfg.BreakerCooldown = duration("WEBHOOKD_BREAKER_COOLDOWN", "10s")
	cfg.DisableMinExhausted = int(positive("WEBHOOKD_DISABLE_MIN_EXHAUSTED", "5"))
	jitter := get("WEBHOOKD_RETRY_JITTER", "0.1")
	if f, err := strconv.ParseFloat(jitter, 64); err != nil || f < 0 || f > 1 {
		errs = append(errs, fmt.Errorf("WEBHOOKD_RETRY_JITTER: %q is not a fraction from 0 to 1 (0.1 adds up to 10%%)", jitter))
	} else {
		cfg.RetryJitter = f
	}
	// "0" turns auto-disable off.
	if get("WEBHOOKD_DISABLE_AFTER", "120h") != "0" {
		cfg.DisableAfter = duration("WEBHOOKD_DISABLE_AFTER", "120h")
	}
	// "0" keeps everything. Otherwise an exhausted delivery must outlive its retry window, and the
	// alert before it, or a manual retry could find it gone: a day more than the window covers both.
	if get("WEBHOOKD_RETENTION", "720h") != "0" {
		cfg.Retention = duration("WEBHOOKD_RETENTION", "720h")
		if minimum := cfg.RetryWindow + 24*time.Hour; cfg.Retention > 0 && cfg.RetryWindow > 0 && cfg.Retention < minimum {
			errs = append(errs, fmt.Errorf("WEBHOOKD_RETENTION: %s is less than WEBHOOKD_RETRY_WINDOW (%s) plus a day: exhausted deliveries would be deleted while they still wait for a manual retry (set WEBHOOKD_RETENTION to %s or more, or 0 to keep everything)",
				cfg.Retention, cfg.RetryWindow, minimum))
		}
	}
	cfg.ExtraCAFile = get("WEBHOOKD_EXTRA_CA_FILE", "")
	cfg.SMTPURL = get("WEBHOOKD_SMTP_URL", "")
	cfg.MailFrom = get("WEBHOOKD_MAIL_FROM", "webhookd <webhookd@localhost>")
	cfg.PublicURL = get("WEBHOOKD_PUBLIC_URL", "http://"+cfg.HTTPAddr)
	cfg.TemporalUIURL = get("WEBHOOKD_TEMPORAL_UI_URL", "http://127.0.0.1:8233")
	cfg.SiteBaseURL = get("WEBHOOKD_SITE_BASE_URL", "https://sites.example.com")
	for k, v := range map[string]string{"WEBHOOKD_PUBLIC_URL": cfg.PublicURL, "WEBHOOKD_TEMPORAL_UI_URL": cfg.TemporalUIURL, "WEBHOOKD_SITE_BASE_URL": cfg.SiteBaseURL} {
		if u, err := url.Parse(v); err != nil || !u.IsAbs() {
			errs = append(errs, fmt.Errorf("%s: %q is not an absolute URL", k, v))
		}
	}
	if v := cfg.SMTPURL; v != "" {
		if u, err := url.Parse(v); err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
			errs = append(errs, errors.New("WEBHOOKD_SMTP_URL: must look like smtp://user:pass@host:port"))
		}
	}
	if _, err := mail.ParseAddress(cfg.MailFrom); err != nil {
		errs = append(errs, fmt.Errorf("WEBHOOKD_MAIL_FROM: %q is not an e-mail address", cfg.MailFrom))
	}
	if v := get("WEBHOOKD_SECRET_KEY", ""); v != "" {
		key, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(key) != 32 {
			errs = append(errs, errors.New("WEBHOOKD_SECRET_KEY: must be the base64 encoding of exactly 32 bytes (openssl rand -base64 32)"))
		}
		cfg.SecretKey = key
	}
	return cfg, errors.Join(errs...)
}

// secretKey returns the configured key, or in development (SQLite, no key set) the key kept in
// <data dir>/secret.key, generated on first use. A PostgreSQL deployment must set the key: a key
// generated on one replica's disk would make the others unable to read the secrets.
func (c Config) secretKey() ([]byte, error) {
	if c.SecretKey != nil {
		return c.SecretKey, nil
	}
	if !strings.HasPrefix(c.DatabaseURL, "sqlite:") {
		return nil, errors.New("WEBHOOKD_SECRET_KEY: required with PostgreSQL (openssl rand -base64 32)")
	}
	path := filepath.Join(c.DataDir, "secret.key")
	if data, err := os.ReadFile(path); err == nil {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("%s: not the base64 encoding of 32 bytes", path)
		}
		return key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate secret key: %w", err)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", c.DataDir, err)
	}
	// O_EXCL: when two processes start at once, one writes and the other reads the winner's key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return c.secretKey()
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return key, f.Sync()
}

// temporalOptions loads the Temporal connection the way the Temporal CLI does: the profile of a
// temporal.toml file (TEMPORAL_CONFIG_FILE, default ~/.config/temporalio/temporal.toml; profile
// TEMPORAL_PROFILE, default "default"), overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS* and TEMPORAL_GRPC_META_* variables. Without any of them webhookd
// talks to a local dev server, as `make run` starts one.
func temporalOptions(env map[string]string) (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: envMap(env)})
	if err != nil {
		return client.Options{}, fmt.Errorf("Temporal client configuration (TEMPORAL_* variables, temporal.toml): %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = "127.0.0.1:7233"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if _, _, err := net.SplitHostPort(opts.HostPort); err != nil {
		return client.Options{}, fmt.Errorf("TEMPORAL_ADDRESS: %w", err)
	}
	return opts, nil
}

// envMap is the environment given to loadConfig, for envconfig, so tests need not touch the
// process's own.
type envMap map[string]string

func (e envMap) LookupEnv(key string) (string, bool) {
	v, ok := e[key]
	return v, ok
}

func (e envMap) Environ() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}
