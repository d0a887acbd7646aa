package activities_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
)

const (
	authPassword     = "pw-0123456789-secret"
	authClientSecret = "cs-9876543210-secret"
)

// tokenServer is a local OAuth2 token endpoint: it counts the grants it answers, checks the
// client's credentials and audience, and issues tok-1, tok-2, ... living expiresIn seconds.
type tokenServer struct {
	*httptest.Server
	requests  atomic.Int64
	expiresIn atomic.Int64
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{}
	ts.expiresIn.Store(3600)
	ts.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != "cid" || secret != authClientSecret ||
			r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("audience") != "https://api.example.com" || r.PostForm.Get("scope") != "a b" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		n := ts.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, ts.expiresIn.Load())
	}))
	t.Cleanup(ts.Close)
	return ts
}

// authReceiver is a receiver that requires an Authorization header (accept judges it) and counts
// the POSTs it gets.
type authReceiver struct {
	*httptest.Server
	posts atomic.Int64
}

func newAuthReceiver(t *testing.T, accept func(r *http.Request) bool) *authReceiver {
	ar := &authReceiver{}
	ar.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar.posts.Add(1)
		if !accept(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ar.Close)
	return ar
}

// authFixture is one webhook with an authentication, and the activities that deliver to it.
type authFixture struct {
	db     *model.DB
	a      *activities.Activities
	hook   *model.Webhook
	logged *bytes.Buffer
	mu     sync.Mutex
	now    time.Time
}

func newAuthFixture(t *testing.T, receiver *httptest.Server, auth string, servers ...*httptest.Server) *authFixture {
	t.Helper()
	ctx := context.Background()
	db := dbtest.SQLite(t)
	box, err := secretbox.New(bytes.Repeat([]byte{6}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	sealedAuth, err := box.Seal(auth) // as webhooks.Service stores it
	if err != nil {
		t.Fatal(err)
	}
	_, acc, err := model.CreateAPIKey(ctx, db, "auth@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: receiver.URL + "/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, Auth: &sealedAuth, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, s := range append(servers, receiver) {
		roots.AddCert(s.Certificate())
	}
	policy := egress.AddressPolicy{AllowPrivate: true}
	out, err := egress.New(egress.Options{Policy: policy, RootCAs: roots, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tokenClient, err := egress.NewTokenClient(policy, roots, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &authFixture{db: db, hook: w, logged: &bytes.Buffer{}, now: time.Now()}
	tokens := activities.NewTokens(tokenClient)
	tokens.Now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	f.a = &activities.Activities{DB: db, Secrets: box, Egress: out, Tokens: tokens, UserAgent: "webhookd/test"}
	return f
}

func (f *authFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// deliver makes the first attempt of a new event's delivery, and returns its result and the
// attempt log's record of it.
func (f *authFixture) deliver(t *testing.T) (activities.DeliverResult, model.Attempt) {
	t.Helper()
	ctx := context.Background()
	res, err := model.InsertEvent(ctx, f.db, model.NewEvent{AccountID: f.hook.AccountID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: f.hook.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Deliveries[0]
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(f.logged, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(f.a)
	v, err := env.ExecuteActivity(f.a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: f.hook.ID, Attempt: 1,
		NextAttemptIn: time.Minute, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var result activities.DeliverResult
	if err := v.Get(&result); err != nil {
		t.Fatal(err)
	}
	view, err := model.GetDelivery(ctx, f.db, f.hook.ID, d.ID)
	if err != nil || len(view.Log) != 1 {
		t.Fatalf("delivery %+v, %v; want one attempt logged", view, err)
	}
	return result, view.Log[0]
}

// authorizationLogged is the Authorization header as the attempt log records it.
func authorizationLogged(t *testing.T, entry model.Attempt) string {
	t.Helper()
	if entry.RequestHeaders == nil {
		return ""
	}
	var recorded map[string]string
	if err := json.Unmarshal([]byte(*entry.RequestHeaders), &recorded); err != nil {
		t.Fatal(err)
	}
	return recorded["Authorization"]
}

// TestDeliverBasicAuth (issue 31, part 2): every attempt of a webhook with Basic authentication
// carries its Authorization header; the attempt log records it redacted, and neither the log nor
// the activity's log output holds the password.
func TestDeliverBasicAuth(t *testing.T) {
	receiver := newAuthReceiver(t, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "u" && p == authPassword
	})
	f := newAuthFixture(t, receiver.Server, `{"type":"basic","username":"u","password":"`+authPassword+`"}`)
	for range 2 {
		res, entry := f.deliver(t)
		if !res.Delivered {
			t.Fatalf("attempt: %+v; want delivered", res)
		}
		if got := authorizationLogged(t, entry); got != "Basic ••••••••" {
			t.Fatalf("the attempt log recorded Authorization %q: %s", got, *entry.RequestHeaders)
		}
		if strings.Contains(*entry.RequestHeaders, authPassword) || strings.Contains(*entry.RequestHeaders, "cHct") {
			t.Fatalf("the attempt log holds the credentials: %s", *entry.RequestHeaders)
		}
	}
	if receiver.posts.Load() != 2 || strings.Contains(f.logged.String(), authPassword) {
		t.Fatalf("%d POSTs; log output %s", receiver.posts.Load(), f.logged.String())
	}
}

const oauthConfig = `{"type":"oauth2","tokenUrl":"%s/token","clientId":"cid","clientSecret":"` + authClientSecret +
	`","scopes":["a","b"],"audience":"https://api.example.com"}`

// bearerOf accepts a request that carries one of tokens as its Bearer token.
func bearerOf(tokens ...string) func(r *http.Request) bool {
	return func(r *http.Request) bool {
		for _, tok := range tokens {
			if r.Header.Get("Authorization") == "Bearer "+tok {
				return true
			}
		}
		return false
	}
}

// TestDeliverOAuth2 (issue 31, part 2): a webhook's token is fetched once and shared by its
// attempts, concurrent or not; fetched anew once it nears its expiry; dropped after a receiver's
// 401, so that the next attempt fetches another; and a token endpoint that fails fails the attempt
// with auth_failed, sending nothing to the receiver. No token or secret reaches the attempt log or
// the log output.
func TestDeliverOAuth2(t *testing.T) {
	t.Run("50 deliveries, 1 token", func(t *testing.T) {
		idp := newTokenServer(t)
		receiver := newAuthReceiver(t, bearerOf("tok-1"))
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp.Server)
		for i := range 50 {
			res, entry := f.deliver(t)
			if !res.Delivered {
				t.Fatalf("delivery %d: %+v; want delivered", i, res)
			}
			if got := authorizationLogged(t, entry); got != "Bearer ••••••••" || strings.Contains(*entry.RequestHeaders, "tok-1") {
				t.Fatalf("the attempt log recorded %s", *entry.RequestHeaders)
			}
		}
		if n := idp.requests.Load(); n != 1 {
			t.Fatalf("%d token requests for 50 deliveries, want 1", n)
		}
		if receiver.posts.Load() != 50 {
			t.Fatalf("%d POSTs, want 50", receiver.posts.Load())
		}
		for _, secret := range []string{"tok-1", authClientSecret} {
			if strings.Contains(f.logged.String(), secret) {
				t.Fatalf("the log output holds %s: %s", secret, f.logged.String())
			}
		}
	})

	t.Run("concurrent attempts share one fetch", func(t *testing.T) {
		idp := newTokenServer(t)
		receiver := newAuthReceiver(t, bearerOf("tok-1"))
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp.Server)
		var auth model.ReceiverAuth
		if err := json.Unmarshal(fmt.Appendf(nil, oauthConfig, idp.URL), &auth); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		tokens := make(chan string, 50)
		for range 50 {
			wg.Go(func() {
				tok, err := f.a.Tokens.Token(context.Background(), f.hook.ID, &auth)
				if err != nil {
					t.Error(err)
				}
				tokens <- tok
			})
		}
		wg.Wait()
		close(tokens)
		for tok := range tokens {
			if tok != "tok-1" {
				t.Fatalf("token %q, want tok-1", tok)
			}
		}
		if n := idp.requests.Load(); n != 1 {
			t.Fatalf("%d token requests for 50 concurrent attempts, want 1", n)
		}
		// Another configuration of the same webhook fetches anew.
		changed := auth
		changed.TokenURL = auth.TokenURL + "?v=2"
		if tok, err := f.a.Tokens.Token(context.Background(), f.hook.ID, &changed); err != nil || tok != "tok-2" || idp.requests.Load() != 2 {
			t.Fatalf("a changed configuration got %q, %v after %d requests; want tok-2 after 2", tok, err, idp.requests.Load())
		}
	})

	t.Run("expiry fetches anew", func(t *testing.T) {
		idp := newTokenServer(t)
		idp.expiresIn.Store(60)
		receiver := newAuthReceiver(t, bearerOf("tok-1", "tok-2"))
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp.Server)
		for range 3 {
			if res, _ := f.deliver(t); !res.Delivered {
				t.Fatalf("attempt: %+v; want delivered", res)
			}
		}
		if n := idp.requests.Load(); n != 1 {
			t.Fatalf("%d token requests before expiry, want 1", n)
		}
		f.advance(51 * time.Second) // within the 10 s margin before the 60 s expiry, not past it
		for range 3 {
			if res, _ := f.deliver(t); !res.Delivered {
				t.Fatalf("attempt: %+v; want delivered", res)
			}
		}
		if n := idp.requests.Load(); n != 2 {
			t.Fatalf("%d token requests after expiry, want 2", n)
		}
	})

	t.Run("a 401 refreshes once", func(t *testing.T) {
		idp := newTokenServer(t)
		receiver := newAuthReceiver(t, bearerOf("tok-2")) // tok-1 was revoked
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp.Server)
		res, _ := f.deliver(t)
		if res.Delivered || res.StatusCode != http.StatusUnauthorized || res.ErrorClass != activities.ClassHTTPStatus {
			t.Fatalf("first attempt: %+v; want a 401", res)
		}
		for range 3 {
			if res, _ := f.deliver(t); !res.Delivered {
				t.Fatalf("attempt after the 401: %+v; want delivered", res)
			}
		}
		if n := idp.requests.Load(); n != 2 {
			t.Fatalf("%d token requests, want 2 (one refresh after the 401)", n)
		}
	})

	t.Run("token endpoint down", func(t *testing.T) {
		idp := newTokenServer(t)
		receiver := newAuthReceiver(t, bearerOf("tok-1"))
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp.Server)
		idp.Close()
		res, entry := f.deliver(t)
		if res.Delivered || res.ErrorClass != activities.ClassAuthFailed || res.StatusCode != 0 || res.NextAttemptIn != time.Minute {
			t.Fatalf("attempt: %+v; want auth_failed with the next attempt scheduled", res)
		}
		if entry.ErrorClass == nil || *entry.ErrorClass != activities.ClassAuthFailed {
			t.Fatalf("the attempt log recorded %+v", entry)
		}
		if receiver.posts.Load() != 0 {
			t.Fatalf("%d POSTs to the receiver, want none", receiver.posts.Load())
		}
		if strings.Contains(res.Error, authClientSecret) || !strings.Contains(res.Error, "token") {
			t.Fatalf("error %q", res.Error)
		}
	})

	t.Run("a hanging token endpoint holds no attempt past its timeout", func(t *testing.T) {
		release := make(chan struct{})
		var asked atomic.Int64
		idp := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			asked.Add(1)
			<-release
		}))
		t.Cleanup(idp.Close)
		t.Cleanup(func() { close(release) })
		receiver := newAuthReceiver(t, bearerOf("tok-1"))
		f := newAuthFixture(t, receiver.Server, fmt.Sprintf(oauthConfig, idp.URL), idp)
		var auth model.ReceiverAuth
		if err := json.Unmarshal(fmt.Appendf(nil, oauthConfig, idp.URL), &auth); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				if _, err := f.a.Tokens.Token(ctx, f.hook.ID, &auth); err == nil {
					t.Error("a token from a hanging endpoint")
				}
			})
		}
		wg.Wait()
		if took := time.Since(start); took > 3*time.Second || asked.Load() != 1 {
			t.Fatalf("10 attempts took %v and asked %d times; want each bounded by its own timeout, one request", took, asked.Load())
		}
	})

	// Issue 41, defect 4: a token that cannot be a header value (a line break) was cached for its
	// hour, and every attempt failed as network, then circuit_open, blaming the receiver.
	t.Run("a token with a line break is refused, not cached", func(t *testing.T) {
		// What the endpoint issues, one per request: a line break, then a space, then a good one.
		issued := []string{"tok-bad\r\nX-Injected: 1", "tok-bad with-space", "tok-good"}
		var asked atomic.Int64
		idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token := issued[min(int(asked.Add(1)), len(issued))-1]
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
			_, _ = w.Write(b)
		}))
		t.Cleanup(idp.Close)
		receiver := newAuthReceiver(t, bearerOf("tok-good"))
		// A token URL with a query: the message names the endpoint without it.
		config := strings.Replace(fmt.Sprintf(oauthConfig, idp.URL+"/oauth"), `/token"`, `/token?key=q-secret"`, 1)
		f := newAuthFixture(t, receiver.Server, config, idp)
		for i := range 2 {
			res, entry := f.deliver(t)
			if res.Delivered || res.ErrorClass != activities.ClassAuthFailed || res.StatusCode != 0 || receiver.posts.Load() != 0 {
				t.Fatalf("attempt with bad token %d: %+v, %d POSTs; want auth_failed, nothing sent", i+1, res, receiver.posts.Load())
			}
			if entry.ErrorClass == nil || *entry.ErrorClass != activities.ClassAuthFailed || entry.Error == nil || *entry.Error != res.Error {
				t.Fatalf("the attempt log recorded %+v", entry)
			}
			if !strings.Contains(res.Error, "the token endpoint "+idp.URL+"/oauth/token ") || strings.Contains(res.Error, "receiver answered") {
				t.Fatalf("error %q; want it to name the token endpoint %s/oauth/token", res.Error, idp.URL)
			}
			for _, secret := range []string{"tok-bad", "X-Injected", "with-space", "q-secret", authClientSecret} {
				if strings.Contains(res.Error, secret) || strings.Contains(f.logged.String(), secret) {
					t.Fatalf("%q is in the error %q or the log output %s", secret, res.Error, f.logged.String())
				}
			}
			// Not cached: each attempt asks the endpoint again.
			if n := asked.Load(); n != int64(i+1) {
				t.Fatalf("%d token requests after %d attempts; want one each (a refused token is not kept)", n, i+1)
			}
		}
		// The endpoint mends its answer: the next attempt's new token is sent, no breaker having
		// been opened by the endpoint's fault.
		if res, _ := f.deliver(t); !res.Delivered || asked.Load() != 3 || receiver.posts.Load() != 1 {
			t.Fatalf("the next attempt: %+v after %d token requests; want delivered with a new token", res, asked.Load())
		}
	})

	t.Run("token endpoint refuses", func(t *testing.T) {
		idp := newTokenServer(t)
		receiver := newAuthReceiver(t, bearerOf("tok-1"))
		f := newAuthFixture(t, receiver.Server, strings.Replace(fmt.Sprintf(oauthConfig, idp.URL), authClientSecret, "wrong-secret", 1), idp.Server)
		res, _ := f.deliver(t)
		if res.ErrorClass != activities.ClassAuthFailed || !strings.Contains(res.Error, "answered 401") || receiver.posts.Load() != 0 {
			t.Fatalf("attempt: %+v, %d POSTs; want auth_failed naming the 401, no POST", res, receiver.posts.Load())
		}
	})
}
