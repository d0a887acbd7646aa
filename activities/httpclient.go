package activities

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/webhookd/webhookd/model"
)

// NewHTTPClient builds the one delivery client of a worker process. It keeps connections alive,
// never uses a proxy (a proxy would dial for us and bypass the address check), refuses blocked
// addresses at dial time after DNS resolution (so a name that rebinds to 127.0.0.1 after
// registration still gets nothing), never follows redirects, and always verifies TLS. extraCAFile
// adds PEM roots beside the system pool, for tests and private PKI.
func NewHTTPClient(policy model.AddressPolicy, extraCAFile string) (*http.Client, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if extraCAFile != "" {
		pem, err := os.ReadFile(extraCAFile)
		if err != nil {
			return nil, fmt.Errorf("WEBHOOKD_EXTRA_CA_FILE: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, errors.New("WEBHOOKD_EXTRA_CA_FILE: no PEM certificate found")
		}
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: policy.DialControl}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0, // the per-attempt context bounds the whole exchange
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}
