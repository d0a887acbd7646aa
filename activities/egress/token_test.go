package egress

import (
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTokenClient: the token client obeys a receiver's rules. The production policy refuses a
// loopback token endpoint when it dials; a redirect is not followed; an answer beyond
// MaxTokenResponse fails its read; plain http is refused unless the policy allows it.
func TestTokenClient(t *testing.T) {
	var redirected, answered int
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			redirected++
		case "/large":
			_, _ = io.WriteString(w, strings.Repeat("x", MaxTokenResponse+1))
		default:
			answered++
			_, _ = io.WriteString(w, strings.Repeat("x", MaxTokenResponse))
		}
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	production, err := NewTokenClient(AddressPolicy{}, roots, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := production.Post(srv.URL+"/token", "application/x-www-form-urlencoded", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("a loopback token endpoint under the production policy: %v, want ErrBlockedAddress", err)
	}
	if answered != 0 {
		t.Fatalf("the refused token endpoint was reached %d times", answered)
	}

	dev, err := NewTokenClient(AddressPolicy{AllowPrivate: true}, roots, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Post(srv.URL+"/redirect", "text/plain", nil); !errors.Is(err, ErrTokenRedirect) || redirected != 0 {
		t.Fatalf("redirect: %v, followed %d times; want ErrTokenRedirect, not followed", err, redirected)
	}
	read := func(path string) error {
		resp, err := dev.Post(srv.URL+path, "text/plain", nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := read("/token"); err != nil {
		t.Fatalf("an answer of exactly %d bytes: %v", MaxTokenResponse, err)
	}
	if err := read("/large"); !errors.Is(err, errTokenTooLarge) {
		t.Fatalf("an answer beyond %d bytes: %v, want errTokenTooLarge", MaxTokenResponse, err)
	}
	plain := "http" + strings.TrimPrefix(srv.URL, "https")
	if _, err := dev.Post(plain+"/token", "text/plain", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("plain http without AllowHTTP: %v, want refused", err)
	}
}

// TestTokenClientThroughProxy: with an egress proxy, a token request goes through it, the proxy
// asked for the checked address (not the name); a token endpoint whose name resolves to a blocked
// address is refused before the proxy hears of it.
func TestTokenClientThroughProxy(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"access_token":"t","token_type":"bearer","expires_in":3600}`)
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	resolver := startTestDNS(t, map[string][]string{"example.com": {"127.0.0.1"}})
	proxy := newConnectProxy(t, "", "")
	p := port(t, srv.URL)

	dev, err := NewTokenClient(AddressPolicy{AllowPrivate: true}, roots, proxy.url(nil), resolver)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := dev.Post("https://example.com:"+p+"/token", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatalf("token request through the proxy: %v", err)
	}
	_ = resp.Body.Close()
	if _, targets := proxy.seen(); len(targets) != 1 || targets[0] != "127.0.0.1:"+p {
		t.Fatalf("CONNECT targets %q, want one to 127.0.0.1:%s", targets, p)
	}

	production, err := NewTokenClient(AddressPolicy{}, roots, proxy.url(nil), resolver)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := production.Post("https://example.com:"+p+"/token", "application/x-www-form-urlencoded", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("a token endpoint resolving to loopback under the production policy: %v, want ErrBlockedAddress", err)
	}
	if accepted, _ := proxy.seen(); accepted != 1 {
		t.Fatalf("the proxy accepted %d connections, want only the allowed request's", accepted)
	}
}
