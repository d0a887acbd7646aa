package activities

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
)

// ClassAuthFailed is the error class of an attempt whose webhook's token endpoint failed (issue
// 31, part 2): nothing was sent to the receiver. It counts as a failure of that webhook alone.
const ClassAuthFailed = "auth_failed"

// tokenMargin is how long before its expiry a token is fetched anew, so that it does not expire
// on its way to the receiver; a token that lives less than twice as long is renewed halfway.
const tokenMargin = 10 * time.Second

// Tokens holds the OAuth2 access tokens of webhooks' receiver authentication in one worker
// process. A token is fetched once (the client-credentials grant, golang.org/x/oauth2) and shared
// by every attempt of its webhook until shortly before it expires; the attempts that need it while
// it is fetched wait for that one fetch. Tokens are keyed by webhook and a hash of the
// authentication's settings, so a changed setting fetches anew. A receiver's 401 drops the token
// it refused (Invalidate): the next attempt fetches another; the attempt that got the 401 is not
// posted again, as one attempt is one POST within its turn at the receiver (docs/api.md).
type Tokens struct {
	client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[tokenKey]*tokenEntry
}

type tokenKey struct {
	webhook int64
	config  [sha256.Size]byte
}

// tokenEntry is one webhook's token. sem, of one place, is held while the token is read or
// fetched; an attempt waits for it no longer than its own context allows.
type tokenEntry struct {
	sem   chan struct{}
	token string
	// renewAt is when the token is fetched anew; zero: the endpoint gave no expiry, and the
	// token lasts until a receiver refuses it.
	renewAt time.Time
	// failed is the error of the last fetch, at failedAt: the attempts that waited for that fetch
	// fail with it rather than each asking a failing endpoint again.
	failed   error
	failedAt time.Time
}

// NewTokens builds the token cache of a worker process; client makes the token requests
// (egress.NewTokenClient: the address policy at dial time, no redirects, bounded).
func NewTokens(client *http.Client) *Tokens {
	return &Tokens{client: client, entries: map[tokenKey]*tokenEntry{}}
}

func (t *Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func keyOf(webhookID int64, auth *model.ReceiverAuth) tokenKey {
	b, _ := json.Marshal(auth) // a struct of strings always marshals
	return tokenKey{webhook: webhookID, config: sha256.Sum256(b)}
}

// entry is the cache entry of key, made on first use; a webhook's entries under another
// configuration are dropped then, as no attempt uses them again.
func (t *Tokens) entry(key tokenKey) *tokenEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[key]; ok {
		return e
	}
	for k := range t.entries {
		if k.webhook == key.webhook {
			delete(t.entries, k)
		}
	}
	e := &tokenEntry{sem: make(chan struct{}, 1)}
	t.entries[key] = e
	return e
}

// Token is a valid access token of webhook webhookID's OAuth2 authentication: the cached one, or
// one fetched now.
func (t *Tokens) Token(ctx context.Context, webhookID int64, auth *model.ReceiverAuth) (string, error) {
	e := t.entry(keyOf(webhookID, auth))
	asked := time.Now()
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-e.sem }()
	now := t.now()
	if e.token != "" && (e.renewAt.IsZero() || now.Before(e.renewAt)) {
		return e.token, nil
	}
	if e.failed != nil && e.failedAt.After(asked) {
		return "", e.failed
	}
	cfg := clientcredentials.Config{
		ClientID: auth.ClientID, ClientSecret: auth.ClientSecret, TokenURL: auth.TokenURL, Scopes: auth.Scopes,
		// client_secret_basic, which RFC 6749 2.3.1 makes every token endpoint support; the
		// library's detection would send a failing endpoint a second request.
		AuthStyle: oauth2.AuthStyleInHeader,
	}
	if auth.Audience != "" {
		cfg.EndpointParams = url.Values{"audience": {auth.Audience}}
	}
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	if err == nil {
		err = checkToken(tok)
	}
	if err != nil {
		// Not kept: the next attempt fetches again, so an endpoint that mends its answer is
		// used at once.
		e.failed, e.failedAt = err, time.Now()
		return "", err
	}
	e.token, e.renewAt, e.failed = tok.AccessToken, time.Time{}, nil
	if !tok.Expiry.IsZero() {
		// The library reads expires_in against its own clock; the lifetime is what counts.
		life := time.Until(tok.Expiry)
		e.renewAt = now.Add(life - min(tokenMargin, life/2))
	}
	return e.token, nil
}

// tokenRefusal is a token that the endpoint issued and webhookd refuses to send: why, in words
// that quote nothing of the token.
type tokenRefusal struct{ why string }

func (e *tokenRefusal) Error() string { return "the token endpoint issued " + e.why }

// checkToken refuses a token that cannot go in the Authorization header as "Bearer <token>": of
// another type, or not one header word (a control character such as a line break, which
// net/http refuses to send, or a space or tab, which would split the credential). Issue 41: such a
// token was kept for its whole life, and every attempt failed at the receiver's door.
func checkToken(tok *oauth2.Token) error {
	if !strings.EqualFold(tok.Type(), "Bearer") {
		return &tokenRefusal{why: fmt.Sprintf("a token of type %q; only Bearer tokens are sent", clipCode(tok.TokenType))}
	}
	if !httpguts.ValidHeaderFieldValue(tok.AccessToken) || strings.ContainsAny(tok.AccessToken, " \t") {
		return &tokenRefusal{why: "an access_token that is not a valid header value (it holds a control character such as a line break, or a space), which was not kept"}
	}
	return nil
}

// Invalidate drops token, which a receiver refused, from webhook webhookID's cache entry, unless
// the entry already holds another one.
func (t *Tokens) Invalidate(webhookID int64, auth *model.ReceiverAuth, token string) {
	e := t.entry(keyOf(webhookID, auth))
	e.sem <- struct{}{}
	defer func() { <-e.sem }()
	if e.token == token {
		e.token = ""
	}
}

// authorization is the Authorization header an attempt sends to the receiver for auth, and what
// the attempt log records of it; token is the OAuth2 access token sent, "" for Basic.
type authorization struct {
	header, shown, token string
}

// authorize makes the Authorization header of webhook w's attempt: Basic from the stored
// credentials, Bearer from the webhook's cached or newly fetched token.
// timeout bounds the fetch (the attempt's timeout; zero: the token client's own).
func (a *Activities) authorize(ctx context.Context, w *model.Webhook, auth *model.ReceiverAuth, timeout time.Duration) (authorization, error) {
	switch auth.Type {
	case model.AuthBasic:
		creds := base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password))
		return authorization{header: "Basic " + creds, shown: "Basic " + redactedCredential}, nil
	case model.AuthOAuth2:
		if a.Tokens == nil {
			return authorization{}, errors.New("this worker has no token client")
		}
		// Within the attempt's own timeout: the activity's budget (AttemptBudget) leaves room
		// for the fetch and then the exchange.
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		token, err := a.Tokens.Token(ctx, w.ID, auth)
		if err != nil {
			return authorization{}, err
		}
		return authorization{header: "Bearer " + token, shown: "Bearer " + redactedCredential, token: token}, nil
	}
	return authorization{}, fmt.Errorf("unknown authentication type %q", clipCode(auth.Type))
}

// redactedCredential stands for the credentials of an Authorization header in the attempt log.
const redactedCredential = "••••••••"

// tokenFailure says why a token could not be had, in words that quote neither the client secret
// nor the token endpoint's answer (which may echo it): its status and OAuth error code, or how the
// exchange failed.
// Each names the endpoint by tokenURL without its user information, query or fragment, which may
// carry credentials.
func tokenFailure(err error, tokenURL string) string {
	const tail = "; nothing was sent to the receiver"
	endpoint := "the token endpoint"
	if named := endpointName(tokenURL); named != "" {
		endpoint += " " + named
	}
	var re *oauth2.RetrieveError
	var refusal *tokenRefusal
	switch class, msg := egress.Classify(err); {
	case errors.As(err, &re) && re.Response != nil:
		msg := fmt.Sprintf("%s answered %d", endpoint, re.Response.StatusCode)
		if code := clipCode(re.ErrorCode); code != "" {
			msg += " (" + code + ")"
		}
		return msg + tail
	case errors.As(err, &refusal):
		return endpoint + " issued " + refusal.why + tail
	case errors.Is(err, egress.ErrTokenRedirect):
		return endpoint + " answered with a redirect, which is not followed" + tail
	case class == egress.ClassBlocked:
		return endpoint + ": its address is not public, or its URL is not https; webhookd does not connect to it" + tail
	default:
		return "the token request failed (" + endpoint + "): " + strings.ReplaceAll(msg, "the receiver", "the token endpoint") + tail
	}
}

// endpointName is a token URL as a message names it: scheme, host and path, "" if it does not
// parse.
func endpointName(tokenURL string) string {
	u, err := url.Parse(tokenURL)
	if err != nil || u.Host == "" {
		return ""
	}
	named := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return named.String()
}

// clipCode keeps an OAuth error code or token type as a short word of letters, digits and _ - .,
// since it comes from a server the customer chose.
func clipCode(code string) string {
	const most = 40
	out := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
			return r
		}
		return -1
	}, code)
	if len(out) > most {
		out = out[:most]
	}
	return out
}
