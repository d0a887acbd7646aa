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
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/tracing"
)

// Config is the whole process configuration, read once from the environment in main and passed
// down in parts. Each tagged field is one variable, declared there and nowhere else in Go: its
// name (env), its default (envDefault; a field without one is derived from others or off), and
// what its value must be beyond its type (check, see ruleFor). The names are a contract with
// operators and tests; docs/configuration.md lists them in this order, and a test holds it to
// these tags.
type Config struct {
	HTTPAddr string `env:"WEBHOOKD_HTTP_ADDR" envDefault:"127.0.0.1:8080" check:"hostport"`
	// DebugAddr, when set, serves net/http/pprof there: off by default, and meant for loopback.
	DebugAddr string `env:"WEBHOOKD_DEBUG_ADDR"`
	// DatabaseURL defaults to SQLite in DataDir.
	DatabaseURL string `env:"WEBHOOKD_DATABASE_URL" check:"databaseURL"`
	DataDir     string `env:"WEBHOOKD_DATA_DIR" envDefault:".data"`
	// Temporal is the client configuration, loaded as the Temporal CLI and SDKs load it (see
	// temporalOptions); serve adds the logger and metrics.
	Temporal client.Options `env:"-"`
	// Tracing is what the standard OTEL_* variables say about traces (tracing.ConfigFromEnv): off
	// unless they name an exporter or an OTLP endpoint. The SDK reads the rest of them itself.
	Tracing   tracing.Config `env:"-"`
	TaskQueue string         `env:"WEBHOOKD_TASK_QUEUE" envDefault:"webhookd"`
	// TemporalCompression is the gRPC compression of requests to the Temporal frontend. The SDK's
	// default, gzip, cost webhookd about 6% of its CPU per delivery, and the server as much again to
	// inflate, for payloads of a few ids (docs/performance-history.md): off unless asked for, as
	// over a slow or metered link to Temporal Cloud.
	TemporalCompression string `env:"WEBHOOKD_TEMPORAL_COMPRESSION" envDefault:"none" check:"none|gzip"`
	// SecretKey is nil when unset: see secretKey.
	SecretKey           []byte  `env:"WEBHOOKD_SECRET_KEY"`
	AllowPrivateTargets bool    `env:"WEBHOOKD_ALLOW_PRIVATE_TARGETS" envDefault:"false"`
	AllowHTTPTargets    bool    `env:"WEBHOOKD_ALLOW_HTTP_TARGETS" envDefault:"false"`
	RateLimit           float64 `env:"WEBHOOKD_RATE_LIMIT" envDefault:"20" check:"positive"`
	// RateBurst defaults to twice RateLimit.
	RateBurst   int   `env:"WEBHOOKD_RATE_BURST" check:"positive"`
	MaxWebhooks int64 `env:"WEBHOOKD_MAX_WEBHOOKS" envDefault:"100" check:"positive"`
	// TemporalRequestTimeout bounds how long an API or portal request waits on Temporal after its
	// commit (a start, a resend, a recovery); what is not started within it the sweeper starts.
	TemporalRequestTimeout time.Duration `env:"WEBHOOKD_TEMPORAL_REQUEST_TIMEOUT" envDefault:"3s" check:"positive"`

	RetrySchedule   []time.Duration `env:"WEBHOOKD_RETRY_SCHEDULE" envDefault:"1m,5m,15m,1h,6h"`
	RetryWindow     time.Duration   `env:"WEBHOOKD_RETRY_WINDOW" envDefault:"168h" check:"positive"`
	DeliveryTimeout time.Duration   `env:"WEBHOOKD_DELIVERY_TIMEOUT" envDefault:"5s" check:"positive"`
	ExtraCAFile     string          `env:"WEBHOOKD_EXTRA_CA_FILE"`
	// EgressProxy, when set, is the CONNECT proxy every delivery goes through
	// (docs/operations.md, "Egress proxy"); it may hold a password, and never prints one.
	EgressProxy redactedURL `env:"WEBHOOKD_EGRESS_PROXY" check:"proxyURL"`
	SMTPURL     string      `env:"WEBHOOKD_SMTP_URL" check:"smtpURL"`
	MailFrom    string      `env:"WEBHOOKD_MAIL_FROM" envDefault:"webhookd <webhookd@localhost>" check:"mailAddress"`
	// PublicURL defaults to http:// and HTTPAddr.
	PublicURL     string        `env:"WEBHOOKD_PUBLIC_URL" check:"absoluteURL"`
	TemporalUIURL string        `env:"WEBHOOKD_TEMPORAL_UI_URL" envDefault:"http://127.0.0.1:8233" check:"absoluteURL"`
	SiteBaseURL   string        `env:"WEBHOOKD_SITE_BASE_URL" envDefault:"https://sites.example.com" check:"absoluteURL"`
	SweepInterval time.Duration `env:"WEBHOOKD_SWEEP_INTERVAL" envDefault:"5s" check:"positive"`
	// MaxConcurrentDeliveries bounds concurrent first attempts per worker process, and
	// MaxConcurrentRetries the later attempts, which have their own task queue.
	MaxConcurrentDeliveries int `env:"WEBHOOKD_MAX_CONCURRENT_DELIVERIES" envDefault:"200" check:"positive"`
	MaxConcurrentRetries    int `env:"WEBHOOKD_MAX_CONCURRENT_RETRIES" envDefault:"100" check:"positive"`
	// WorkflowCacheSize is how many workflows a worker process keeps in memory between their
	// tasks (the SDK's sticky cache). A delivery waiting on a retry timer needs none: evicted, it
	// replays its short history when the timer fires.
	WorkflowCacheSize int `env:"WEBHOOKD_WORKFLOW_CACHE_SIZE" envDefault:"1000" check:"positive"`
	// RetryJitter is the largest fraction added to each retry delay.
	RetryJitter float64 `env:"WEBHOOKD_RETRY_JITTER" envDefault:"0.1" check:"fraction"`
	// HostConcurrency caps one receiver host's attempts in flight per worker process, and
	// EndpointConcurrency one endpoint's (a webhook's URL) unless the webhook sets maxInFlight;
	// both default to a share of the slots above them. BreakerFailures failures in a row open an
	// endpoint's breaker (timeouts, broken connections) or a host's (refused connections, DNS,
	// TLS) for BreakerCooldown.
	HostConcurrency     int           `env:"WEBHOOKD_HOST_CONCURRENCY" check:"positive"`
	EndpointConcurrency int           `env:"WEBHOOKD_ENDPOINT_CONCURRENCY" check:"positive"`
	BreakerFailures     int           `env:"WEBHOOKD_BREAKER_FAILURES" envDefault:"5" check:"positive"`
	BreakerCooldown     time.Duration `env:"WEBHOOKD_BREAKER_COOLDOWN" envDefault:"10s" check:"positive"`
	// DisableAfter is how long a webhook may fail without a success before it is disabled (zero:
	// never), once at least DisableMinExhausted of its deliveries were exhausted.
	DisableAfter        time.Duration `env:"WEBHOOKD_DISABLE_AFTER" envDefault:"120h" check:"positiveOr0"`
	DisableMinExhausted int           `env:"WEBHOOKD_DISABLE_MIN_EXHAUSTED" envDefault:"5" check:"positive"`
	// NoticeWarnBefore is how long before the auto-disable rule would disable a webhook that its
	// owner is warned (webhook.disabling; at most half of DisableAfter), NoticeQuiet the storm
	// rule's quiet period after a failing/recovered pair (docs/notifications.md).
	NoticeWarnBefore time.Duration `env:"WEBHOOKD_NOTICE_WARN_BEFORE" envDefault:"24h" check:"positiveOr0"`
	NoticeQuiet      time.Duration `env:"WEBHOOKD_NOTICE_QUIET" envDefault:"15m" check:"positiveOr0"`
	// Retention is how long events, deliveries and attempts are kept once finished (zero: forever).
	Retention time.Duration `env:"WEBHOOKD_RETENTION" envDefault:"720h" check:"positiveOr0"`
	LogLevel  slog.Level    `env:"WEBHOOKD_LOG_LEVEL" envDefault:"info"`
	LogFormat string        `env:"WEBHOOKD_LOG_FORMAT" envDefault:"text" check:"text|json"`

	// Portal serves the owner's portal at /portal/ (docs/portal.md); PortalFrameAncestors is its
	// Content-Security-Policy frame-ancestors, the pages that may embed it in an iframe.
	Portal               bool   `env:"WEBHOOKD_PORTAL" envDefault:"true"`
	PortalFrameAncestors string `env:"WEBHOOKD_PORTAL_FRAME_ANCESTORS" envDefault:"'self'" check:"cspSources"`
}

// redactedURL is a URL that may hold a password: printed (%v, %+v of the Config, a log line), it
// shows "xxxxx" in its place.
type redactedURL string

func (u redactedURL) String() string {
	parsed, err := url.Parse(string(u))
	if err != nil {
		return "(unparsable URL)"
	}
	return parsed.Redacted()
}

func (u redactedURL) GoString() string { return fmt.Sprintf("%q", u.String()) }

// URL parses it; nil when it is empty.
func (u redactedURL) URL() (*url.URL, error) {
	if u == "" {
		return nil, nil
	}
	parsed, err := url.Parse(string(u))
	if err != nil {
		return nil, errors.New("not a URL") // the parser's message quotes the password
	}
	return parsed, egress.CheckProxyURL(parsed)
}

// testVariables are read by the test suite, not by the service; allowed so a test shell can run
// the binary.
var testVariables = []string{"WEBHOOKD_TEST_DATABASE_URL", "WEBHOOKD_TEST_LOG", "WEBHOOKD_SCREENSHOTS"}

// parsers read the types the env package does not read as we mean them. Their errors are only
// noted: ruleFor says what the value must be.
var parsers = map[reflect.Type]env.ParserFunc{
	// A retry schedule, "1m, 5m,15m": each delay positive.
	reflect.TypeFor[[]time.Duration](): func(v string) (any, error) {
		var list []time.Duration
		for part := range strings.SplitSeq(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(part))
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%q is not a positive duration", part)
			}
			list = append(list, d)
		}
		return list, nil
	},
	// The secret key, in base64.
	reflect.TypeFor[[]byte](): func(v string) (any, error) {
		key, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(key) != 32 {
			return nil, errors.New("not the base64 encoding of 32 bytes")
		}
		return key, nil
	},
}

// loadConfig reads the configuration from environ (os.Environ form). Every malformed value, and
// any WEBHOOKD_ variable no field declares (a typo), is an error naming its variable.
func loadConfig(environ []string) (Config, error) {
	vars := env.ToMap(environ)
	known, err := knownVariables()
	if err != nil {
		return Config{}, err
	}
	var errs []error
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "WEBHOOKD_") && !slices.Contains(known, k) {
			errs = append(errs, fmt.Errorf("%s: unknown variable (known: %s)", k, strings.Join(known, ", ")))
		}
	}

	var cfg Config
	unparsed := map[string]bool{}
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars, FuncMap: parsers}); err != nil {
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			return Config{}, err
		}
		for _, e := range agg.Errors {
			var pe env.ParseError
			if !errors.As(e, &pe) {
				return Config{}, e // a tag the env package cannot read: a defect, not the operator's
			}
			unparsed[pe.Name] = true
		}
	}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" || key == "-" {
			continue
		}
		// An empty value is an unset one, as env reads it: the default, or left for the
		// derivations below.
		raw := vars[key]
		if raw == "" {
			def, ok := f.Tag.Lookup("envDefault")
			if !ok {
				continue
			}
			raw = def
		}
		switch r := ruleFor(f, reflect.ValueOf(cfg).Field(i)); {
		case r.ok && !unparsed[f.Name]:
		case r.secret:
			errs = append(errs, fmt.Errorf("%s: must be %s", key, r.want))
		default:
			errs = append(errs, fmt.Errorf("%s: %q is not %s", key, raw, r.want))
		}
	}

	// The defaults that follow other values. A field still zero here was not set: a zero set is
	// refused above.
	if cfg.DatabaseURL == "" {
		// The development database lives with the other development files, so a stack started with
		// its own data dir (the tests, a second `make run`) has its own database too.
		cfg.DatabaseURL = "sqlite:" + filepath.Join(cfg.DataDir, "webhookd.db")
	}
	if cfg.RateBurst == 0 {
		cfg.RateBurst = int(math.Ceil(2 * cfg.RateLimit))
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.HTTPAddr
	}
	// A receiver host may hold a small share of the first-attempt slots (16 of the default 200),
	// or isolation is gone: a cap of half the slots or more is refused.
	if cfg.HostConcurrency == 0 {
		cfg.HostConcurrency = max(2, cfg.MaxConcurrentDeliveries/12)
	}
	if cfg.MaxConcurrentDeliveries > 0 && cfg.HostConcurrency > cfg.MaxConcurrentDeliveries/2 {
		errs = append(errs, fmt.Errorf("WEBHOOKD_HOST_CONCURRENCY: %d is more than half of WEBHOOKD_MAX_CONCURRENT_DELIVERIES (%d): one receiver host could take the worker's slots",
			cfg.HostConcurrency, cfg.MaxConcurrentDeliveries))
	}
	// No single endpoint may take more than a quarter of its host's slots unless its webhook says.
	if cfg.EndpointConcurrency == 0 {
		cfg.EndpointConcurrency = max(1, cfg.HostConcurrency/4)
	}
	if cfg.EndpointConcurrency > cfg.HostConcurrency {
		errs = append(errs, fmt.Errorf("WEBHOOKD_ENDPOINT_CONCURRENCY: %d is more than WEBHOOKD_HOST_CONCURRENCY (%d)", cfg.EndpointConcurrency, cfg.HostConcurrency))
	}
	// An exhausted delivery must outlive its retry window, and the alert before it, or a manual
	// retry could find it gone: a day more than the window covers both.
	if minimum := cfg.RetryWindow + 24*time.Hour; cfg.Retention > 0 && cfg.RetryWindow > 0 && cfg.Retention < minimum {
		errs = append(errs, fmt.Errorf("WEBHOOKD_RETENTION: %s is less than WEBHOOKD_RETRY_WINDOW (%s) plus a day: exhausted deliveries would be deleted while they still wait for a manual retry (set WEBHOOKD_RETENTION to %s or more, or 0 to keep everything)",
			cfg.Retention, cfg.RetryWindow, minimum))
	}
	if cfg.Tracing, err = tracing.ConfigFromEnv(envMap(vars).LookupEnv); err != nil {
		errs = append(errs, err)
	}
	if opts, err := temporalOptions(vars); err != nil {
		errs = append(errs, err)
	} else {
		cfg.Temporal = opts
		if cfg.TemporalCompression == "gzip" {
			cfg.Temporal.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
		} else {
			cfg.Temporal.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
		}
	}
	return cfg, errors.Join(errs...)
}

// knownVariables are the WEBHOOKD_ variables a process accepts: the Config fields', then the
// test suite's.
func knownVariables() ([]string, error) {
	fields, err := env.GetFieldParams(&Config{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.Key)
	}
	return append(append(names, testVariables...), clientVariables...), nil
}

// A rule is what a variable's value must be: ok says whether a parsed value is that, want says it
// in the message refusing one, and secret keeps the value out of the message (it may hold a
// password).
type rule struct {
	ok     bool
	want   string
	secret bool
}

// ruleFor is the rule of field f, holding the parsed value v: its type's, refined by its check tag,
// one of positive (above zero), positiveOr0 (zero turns it off), fraction (0 to 1), hostport,
// absoluteURL, smtpURL, proxyURL, mailAddress, databaseURL, cspSources, or a|b (one of these words).
func ruleFor(f reflect.StructField, v reflect.Value) rule {
	switch c := f.Tag.Get("check"); c {
	case "positive":
		ok := v.CanInt() && v.Int() > 0 || v.CanFloat() && v.Float() > 0
		switch {
		case f.Type == reflect.TypeFor[time.Duration]():
			return rule{ok: ok, want: "a positive duration such as 5s or 1h"}
		case v.CanFloat():
			return rule{ok: ok, want: "a positive number"}
		}
		return rule{ok: ok, want: "a positive integer"}
	case "positiveOr0":
		return rule{ok: v.Int() >= 0, want: "0 or a positive duration such as 120h"}
	case "fraction":
		return rule{ok: v.Float() >= 0 && v.Float() <= 1, want: "a fraction from 0 to 1 (0.1 adds up to 10%)"}
	case "hostport":
		_, _, err := net.SplitHostPort(v.String())
		return rule{ok: err == nil, want: "a host:port such as 127.0.0.1:8080"}
	case "absoluteURL":
		u, err := url.Parse(v.String())
		return rule{ok: err == nil && u.IsAbs(), want: "an absolute URL"}
	case "smtpURL":
		u, err := url.Parse(v.String())
		return rule{ok: err == nil && u.Scheme == "smtp" && u.Hostname() != "", want: "a URL such as smtp://user:pass@host:587", secret: true}
	case "proxyURL":
		_, err := redactedURL(v.String()).URL()
		return rule{ok: err == nil, want: "an http:// or https:// proxy URL such as http://user:pass@proxy:3128", secret: true}
	case "mailAddress":
		_, err := mail.ParseAddress(v.String())
		return rule{ok: err == nil, want: "an e-mail address"}
	case "cspSources":
		// One directive's sources: a ";" or "," would end the directive, a line break the header.
		s := v.String()
		ok := strings.TrimSpace(s) != "" && !strings.ContainsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r < 0x20 || r == 0x7f })
		return rule{ok: ok, want: "CSP sources separated by spaces, such as 'self' https://app.example.com"}
	case "databaseURL":
		s := v.String()
		ok := strings.HasPrefix(s, "sqlite:") || strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
		return rule{ok: ok, want: "a URL starting with sqlite: or postgres://", secret: true}
	case "":
	default:
		words := strings.Split(c, "|")
		return rule{ok: slices.Contains(words, v.String()), want: strings.Join(words, " or ")}
	}
	// No check: the value only has to parse.
	switch f.Type {
	case reflect.TypeFor[bool]():
		return rule{ok: true, want: "true or false"}
	case reflect.TypeFor[slog.Level]():
		return rule{ok: true, want: "debug, info, warn or error"}
	case reflect.TypeFor[[]time.Duration]():
		return rule{ok: true, want: "a list of positive durations such as 1m,5m,15m,1h,6h"}
	case reflect.TypeFor[[]byte]():
		return rule{ok: true, want: "the base64 encoding of exactly 32 bytes (openssl rand -base64 32)", secret: true}
	}
	return rule{ok: true, want: "a " + f.Type.String()}
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
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	// A key whose file did not close may not be the one a restart reads.
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}

// temporalOptions loads the Temporal connection the way the Temporal CLI does: the profile of a
// temporal.toml file (TEMPORAL_CONFIG_FILE, default ~/.config/temporalio/temporal.toml; profile
// TEMPORAL_PROFILE, default "default"), overridden by TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS* and TEMPORAL_GRPC_META_* variables. Without any of them webhookd
// talks to a local dev server, as `make run` starts one.
func temporalOptions(vars map[string]string) (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: envMap(vars)})
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
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

// noticeRules are the rules of the health notices (docs/notifications.md), the same for the worker
// and the use cases.
func (cfg *Config) noticeRules() notices.Rules {
	return notices.Rules{
		Disable:    notices.DisableRule{After: cfg.DisableAfter, MinExhausted: cfg.DisableMinExhausted},
		WarnBefore: cfg.NoticeWarnBefore, Quiet: cfg.NoticeQuiet, PublicURL: cfg.PublicURL,
	}
}
