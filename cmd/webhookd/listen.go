package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

const listenUsage = `usage: webhookd listen --webhook ID --forward-to URL [--api URL] [--key KEY] [--variant A|B]
                       [--since T] [--interval D] [--timeout D]`

// The variables listen reads when --api and --key are not given. They belong to a client, not to
// the service: loadConfig lets them be (clientVariables).
const (
	envAPIURL = "WEBHOOKD_API_URL"
	envAPIKey = "WEBHOOKD_API_KEY"
)

// clientVariables are read by webhookd's client commands (listen), never by the service: a
// developer's shell that exports them can still run serve.
var clientVariables = []string{envAPIURL, envAPIKey}

// listenConfig is a parsed `webhookd listen` command line.
type listenConfig struct {
	API       *url.URL
	Key       string
	WebhookID int64
	Target    *url.URL
	// Variant is the webhook's variant, empty to find it: A's prefix is asked first, then B's.
	Variant model.Variant
	// Since, when set, replays the events that occurred from then on before following new ones.
	Since    *time.Time
	Interval time.Duration
	Timeout  time.Duration
}

// parseListen reads listen's flags, then the environment for what they leave out: flags win.
func parseListen(args, environ []string, stderr io.Writer) (listenConfig, error) {
	var c listenConfig
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		api      = fs.String("api", "", "the API's base URL (default $"+envAPIURL+", else http://127.0.0.1:8080)")
		key      = fs.String("key", "", "an API key of the webhook's account (default $"+envAPIKey+")")
		webhook  = fs.Int64("webhook", 0, "the webhook whose events to forward (required)")
		target   = fs.String("forward-to", "", "the local receiver's http or https URL (required)")
		variant  = fs.String("variant", "", "A or B: the webhook's variant (default: found by asking A, then B)")
		since    = fs.String("since", "", "ISO 8601 time: also replay the events that occurred from then on")
		interval = fs.Duration("interval", time.Second, "how often to ask the event log for new events")
		timeout  = fs.Duration("timeout", 5*time.Second, "how long the receiver has to answer each request")
	)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return c, err
	} else if err != nil {
		return c, usagef("listen: %v", err) // the flag package has shown the flags
	}
	if fs.NArg() != 0 {
		return c, usagef("listen: unexpected argument %q\n%s", fs.Arg(0), listenUsage)
	}
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	if *api == "" {
		*api = vars[envAPIURL]
	}
	if *api == "" {
		*api = "http://127.0.0.1:8080"
	}
	if *key == "" {
		*key = vars[envAPIKey]
	}
	var err error
	if c.API, err = httpURL(*api); err != nil {
		return c, usagef("--api (or %s): %v", envAPIURL, err)
	}
	c.API.Path = strings.TrimSuffix(c.API.Path, "/")
	if c.Key = strings.TrimSpace(*key); c.Key == "" {
		return c, usagef("--key or %s is required: an API key of the webhook's account", envAPIKey)
	}
	if *webhook < 1 {
		return c, usagef("--webhook is required: the id of a webhook (GET <prefix>/webhooks lists them)")
	}
	c.WebhookID = *webhook
	if *target == "" {
		return c, usagef("--forward-to is required: the URL of the receiver to forward to, e.g. http://localhost:3000/hooks")
	}
	if c.Target, err = httpURL(*target); err != nil {
		return c, usagef("--forward-to: %v", err)
	}
	if *variant != "" {
		c.Variant = model.Variant(strings.ToUpper(*variant))
		if !c.Variant.Valid() {
			return c, usagef("--variant: %q is not A or B", *variant)
		}
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return c, usagef("--since: %q is not an ISO 8601 time such as 2026-11-23T10:00:00Z", *since)
		}
		t = t.UTC()
		c.Since = &t
	}
	if *interval < 100*time.Millisecond {
		return c, usagef("--interval: %s is shorter than 100ms", *interval)
	}
	if *timeout <= 0 {
		return c, usagef("--timeout: %s is not a positive duration", *timeout)
	}
	c.Interval, c.Timeout = *interval, *timeout
	return c, nil
}

// httpURL parses an absolute http or https URL.
func httpURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q is not an http or https URL", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	return u, nil
}

// listenCommand forwards the new events of one webhook's type to a receiver on the developer's
// machine, signed with the webhook's current secret, as deliveries would be: a receiver can be
// built before it has a public address. It reads through the API with an account's key, so it
// needs no database, no Temporal and no configuration of the service, and it sends from the
// developer's machine: the service's address policy is neither used nor changed.
func listenCommand(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	cfg, err := parseListen(args, environ, stderr)
	if err != nil {
		return err
	}
	api := &apiClient{base: cfg.API, key: cfg.Key, http: &http.Client{Timeout: 30 * time.Second}}
	l, err := startListener(ctx, api, cfg)
	if ctx.Err() != nil {
		return nil // Ctrl-C before it started
	}
	if err != nil {
		return err
	}
	from := "new events"
	if cfg.Since != nil {
		from = "events from " + cfg.Since.Format(time.RFC3339)
	}
	fmt.Fprintf(stderr, "webhookd listen: webhook %d (variant %s, %s): forwarding %s to %s; Ctrl-C to stop\n",
		cfg.WebhookID, l.variant, l.eventType, from, cfg.Target)
	return l.follow(ctx, stdout, stderr)
}

// listener follows one webhook's events through the event log.
type listener struct {
	api       *apiClient
	cfg       listenConfig
	variant   model.Variant
	spec      *model.VariantSpec
	eventType string
	secret    string
	// since bounds every read of the event log from below, so nothing older is ever replayed;
	// cursor is the last event read (after=).
	since  time.Time
	cursor int64
	out    *http.Client
	now    func() time.Time
}

// startListener reads the webhook, its secret and where the event log ends. Every failure here is
// final: a wrong key or webhook does not get better by waiting.
func startListener(ctx context.Context, api *apiClient, cfg listenConfig) (*listener, error) {
	l := &listener{api: api, cfg: cfg, now: time.Now}
	var hook struct {
		EventType string `json:"eventType"`
	}
	variants := model.Variants
	if cfg.Variant != "" {
		variants = []model.Variant{cfg.Variant}
	}
	var serverNow time.Time
	for _, v := range variants {
		api.spec = v.Spec()
		h, err := api.get(ctx, "/webhooks/"+strconv.FormatInt(cfg.WebhookID, 10), nil, &hook)
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		l.variant, l.spec, serverNow = v, v.Spec(), serverTime(h)
		break
	}
	if l.spec == nil {
		return nil, fmt.Errorf("webhook %d: not found in variant %s of this key's account", cfg.WebhookID, joinVariants(variants))
	}
	if hook.EventType == "" {
		return nil, fmt.Errorf("webhook %d: the API's answer names no eventType", cfg.WebhookID)
	}
	l.eventType = hook.EventType
	if err := l.readSecret(ctx); err != nil {
		return nil, err
	}
	l.out = &http.Client{
		Timeout: cfg.Timeout,
		// As a delivery: a redirect is the receiver's answer, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if cfg.Since != nil {
		l.since = *cfg.Since
		return l, nil
	}
	// New events only: those the server accepts from now on. The server's clock bounds the reads,
	// so the developer's clock may be off; the events of the current second already stored are
	// skipped by moving the cursor past them.
	l.since = serverNow
	for {
		page, more, err := l.api.events(ctx, l.eventType, l.since, l.cursor)
		if err != nil {
			return nil, err
		}
		if len(page) > 0 {
			l.cursor = page[len(page)-1].ID
		}
		if !more || len(page) == 0 {
			return l, nil
		}
	}
}

func joinVariants(vs []model.Variant) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return strings.Join(s, " or ")
}

// serverTime is the Date of the API's answer, whole seconds: where the new events start.
func serverTime(h http.Header) time.Time {
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		return t.UTC()
	}
	return time.Now().UTC().Truncate(time.Second)
}

// readSecret reads the webhook's current secret. It is read again before each batch of events, so
// a rotation while listening signs the next event with the new secret.
func (l *listener) readSecret(ctx context.Context) error {
	var s struct {
		Secret string `json:"secret"`
	}
	if _, err := l.api.get(ctx, "/webhooks/"+strconv.FormatInt(l.cfg.WebhookID, 10)+"/secret", nil, &s); err != nil {
		return fmt.Errorf("webhook %d's secret: %w", l.cfg.WebhookID, err)
	}
	if !strings.HasPrefix(s.Secret, wire.SecretPrefix) {
		return fmt.Errorf("webhook %d's secret: the API's answer holds no %s secret", l.cfg.WebhookID, wire.SecretPrefix)
	}
	l.secret = s.Secret
	return nil
}

// follow polls the event log until ctx ends. An API that answers 5xx or not at all is reported
// and asked again; an answer that will not change (401, 404) ends the command.
func (l *listener) follow(ctx context.Context, stdout, stderr io.Writer) error {
	ticker := time.NewTicker(l.cfg.Interval)
	defer ticker.Stop()
	var lastErr string
	for {
		err := l.poll(ctx, stdout)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !transient(err):
			return err
		case err != nil && err.Error() != lastErr:
			fmt.Fprintf(stderr, "webhookd listen: %v (asking again every %s)\n", err, l.cfg.Interval)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			fmt.Fprintln(stderr, "webhookd listen: the API answers again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// poll forwards every event after the cursor, page after page, one at a time in id order.
func (l *listener) poll(ctx context.Context, stdout io.Writer) error {
	for {
		page, more, err := l.api.events(ctx, l.eventType, l.since, l.cursor)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		if err := l.readSecret(ctx); err != nil {
			return err
		}
		for _, ev := range page {
			line := l.forward(ctx, ev)
			if ctx.Err() != nil {
				return nil // Ctrl-C: the request it cut short is not reported as the receiver's error
			}
			fmt.Fprintln(stdout, line)
			l.cursor = ev.ID
		}
		if !more {
			return nil
		}
	}
}

// forward POSTs one event to the receiver as its delivery would be sent, and returns the line that
// reports it.
func (l *listener) forward(ctx context.Context, ev logEvent) string {
	line := func(outcome string, latency time.Duration) string {
		return fmt.Sprintf("%s  evt %d  %s  -> %s  %dms", l.now().UTC().Format(time.RFC3339), ev.ID, ev.Type, outcome, latency.Milliseconds())
	}
	body, err := l.body(ev)
	if err != nil {
		return line("not sent: "+err.Error(), 0)
	}
	started := l.now()
	msgID := wire.MessageID(ev.ID, l.cfg.WebhookID)
	signature, err := wire.StandardSignature(msgID, started, body, l.secret)
	if err != nil {
		return line("not sent: "+err.Error(), 0)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.cfg.Target.String(), bytes.NewReader(body))
	if err != nil {
		return line("not sent: "+err.Error(), 0)
	}
	req.Header = wire.DeliveryHeader(msgID, ev.Type, "webhookd/"+version, started)
	req.Header.Set(wire.HeaderSignature, signature)
	resp, err := l.out.Do(req)
	latency := l.now().Sub(started)
	if err != nil {
		return line("error: "+err.Error(), latency)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	outcome := resp.Status
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		outcome += " (redirects are not followed)"
	}
	return line(outcome, latency)
}

// body is the delivery body of ev for the webhook's variant, built by the functions a delivery
// uses. The event log's data is the stored canonical form, but the API's JSON encoder escapes <,
// > and & in it: CanonicalJSON gives back the stored bytes, which the deliveries carry.
func (l *listener) body(ev logEvent) ([]byte, error) {
	data, err := wire.CanonicalJSON(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("event data: %w", err)
	}
	return wire.Body(l.spec.Body, ev.Type, json.RawMessage(data), ev.OccurredAt, l.secret), nil
}

// logEvent is an event as GET <prefix>/events lists it; the type is eventType in A, event in B.
type logEvent struct {
	ID         int64           `json:"id"`
	EventType  string          `json:"eventType"`
	Event      string          `json:"event"`
	Data       json.RawMessage `json:"data"`
	OccurredAt time.Time       `json:"occurredAt"`
	Type       string          `json:"-"`
}

// apiClient reads one variant's API with an account's key.
type apiClient struct {
	base *url.URL
	key  string
	spec *model.VariantSpec
	http *http.Client
}

// apiError is an answer of the API other than 200: final, except a 5xx or a 429.
type apiError struct {
	Status  int
	Message string
	what    string
}

func (e *apiError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return fmt.Sprintf("%s: the API refused the key (401 %s): check --key or %s", e.what, e.Message, envAPIKey)
	case http.StatusForbidden:
		// Out of the key's scope (docs/api.md, "Scoped API keys"): listen reads the webhook's
		// secret, which only a manage key may.
		return fmt.Sprintf("%s: the API refused the key's scope (403 %s): webhookd listen reads the webhook and its secret, which needs a manage key", e.what, e.Message)
	case http.StatusNotFound:
		return fmt.Sprintf("%s: not found (404 %s)", e.what, e.Message)
	}
	return fmt.Sprintf("%s: the API answered %d %s", e.what, e.Status, e.Message)
}

// unreachableError: the API did not answer.
type unreachableError struct {
	api string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("the API at %s does not answer: %v", e.api, e.err)
}
func (e *unreachableError) Unwrap() error { return e.err }

// transient reports whether asking again may succeed.
func transient(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	var ue *unreachableError
	return errors.As(err, &ue)
}

// events reads one page of the event log: eventType's events that occurred from since, after the
// cursor, in id order; more when the API links a further page (a page may be cut short by its
// bytes, so only the link says whether it was the last).
func (c *apiClient) events(ctx context.Context, eventType string, since time.Time, after int64) ([]logEvent, bool, error) {
	q := url.Values{
		"eventType": {eventType}, "since": {since.UTC().Format(time.RFC3339Nano)}, "limit": {"200"},
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var page []logEvent
	h, err := c.get(ctx, "/events", q, &page)
	if err != nil {
		return nil, false, err
	}
	for i := range page {
		page[i].Type = page[i].EventType
		if c.spec.TypeField == "event" {
			page[i].Type = page[i].Event
		}
	}
	return page, strings.Contains(h.Get("Link"), `rel="next"`), nil
}

// get reads path under the variant's prefix into out, the envelope's data.
func (c *apiClient) get(ctx context.Context, path string, q url.Values, out any) (http.Header, error) {
	u := *c.base
	u.Path += c.spec.APIPrefix + path
	u.RawQuery = q.Encode()
	what := "GET " + c.spec.APIPrefix + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	cred := c.key
	if c.spec.AuthScheme != "" {
		cred = c.spec.AuthScheme + " " + c.key
	}
	req.Header.Set(c.spec.AuthHeader, cred)
	req.Header.Set("User-Agent", "webhookd-listen/"+version)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &unreachableError{api: c.base.String(), err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, &unreachableError{api: c.base.String(), err: err}
	}
	var env struct {
		Data    json.RawMessage `json:"data"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		if resp.StatusCode != http.StatusOK {
			return nil, &apiError{Status: resp.StatusCode, Message: http.StatusText(resp.StatusCode), what: what}
		}
		return nil, fmt.Errorf("%s: the answer is not webhookd's JSON (is %s webhookd's API?)", what, c.base)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &apiError{Status: resp.StatusCode, Message: env.Message, what: what}
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return nil, fmt.Errorf("%s: the answer's data: %w", what, err)
	}
	return resp.Header, nil
}
