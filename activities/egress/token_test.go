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

	production, err := NewTokenClient(AddressPolicy{}, roots)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := production.Post(srv.URL+"/token", "application/x-www-form-urlencoded", nil); !errors.Is(err, ErrBlockedAddress) {
		t.Fatalf("a loopback token endpoint under the production policy: %v, want ErrBlockedAddress", err)
	}
	if answered != 0 {
		t.Fatalf("the refused token endpoint was reached %d times", answered)
	}

	dev, err := NewTokenClient(AddressPolicy{AllowPrivate: true}, roots)
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
