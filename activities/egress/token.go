package egress

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// The bounds of a token request (a webhook's OAuth2 client-credentials grant): how long the whole
// exchange may take, and how much of the token endpoint's answer is read.
const (
	TokenTimeout      = 10 * time.Second
	MaxTokenResponse  = 64 << 10
	tokenDialTimeout  = 5 * time.Second
	tokenIdleConns    = 16
	tokenIdleDuration = 90 * time.Second
)

// ErrTokenRedirect is the error of a token endpoint that answers with a redirect: it is not
// followed, as a receiver's is not, since the next hop would escape the address check at
// registration.
var ErrTokenRedirect = errors.New("the token endpoint answered with a redirect, which is not followed")

// errTokenTooLarge ends the read of a token endpoint's answer beyond MaxTokenResponse.
var errTokenTooLarge = fmt.Errorf("the token endpoint's answer exceeded %d KiB", MaxTokenResponse>>10)

// NewTokenClient builds the HTTP client of token requests. A token URL is a URL the customer
// chose, as a receiver's is, so it obeys the same rules: the dialer refuses a blocked address
// after DNS resolution (policy.DialControl), plain http only where the policy allows it, no
// redirect is followed, and the exchange and the answer are bounded. roots nil trusts the system's
// roots. With proxy set (WEBHOOKD_EGRESS_PROXY), token requests go through it as deliveries do:
// the name resolved by resolver (nil: the system's) and checked here, the proxy asked for the
// checked address only.
func NewTokenClient(policy AddressPolicy, roots *x509.CertPool, proxy *url.URL, resolver *net.Resolver) (*http.Client, error) {
	if roots == nil {
		var err error
		if roots, err = RootCAs(""); err != nil {
			return nil, err
		}
	}
	dialer := &net.Dialer{Timeout: tokenDialTimeout, KeepAlive: 30 * time.Second, Control: policy.DialControl, Resolver: resolver}
	dial := dialer.DialContext
	if proxy != nil {
		pd, err := newProxyDialer(proxy, policy, resolver, roots)
		if err != nil {
			return nil, err
		}
		dial = pd.DialContext
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           tokenIdleConns,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        tokenIdleDuration,
		TLSHandshakeTimeout:    tokenDialTimeout,
		MaxResponseHeaderBytes: MaxResponseRead,
	}
	return &http.Client{
		Transport: &tokenTransport{base: transport, allowHTTP: policy.AllowHTTP},
		Timeout:   TokenTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return ErrTokenRedirect
		},
	}, nil
}

// tokenTransport refuses plain http unless allowed, and bounds the answer it hands on.
type tokenTransport struct {
	base      http.RoundTripper
	allowHTTP bool
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && t.allowHTTP) {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, fmt.Errorf("%w: the token URL must use https", ErrBlockedAddress)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{body: resp.Body, left: MaxTokenResponse}
	return resp, nil
}

// boundedBody fails a read beyond left bytes, rather than truncating the answer silently.
type boundedBody struct {
	body io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells an answer of exactly the bound from a longer one.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			return 0, errTokenTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.body.Close() }
