package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// blameOpening is blame for an exchange whose tunnel was still opening.
func (ts *tunnelState) blameOpening(proxy string, err error) error {
	ts.Store(tunnelOpening)
	return ts.blame(proxy, err)
}

func TestClassify(t *testing.T) {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "https://example.com/hook", Err: err} }
	dial := func(err error) error { return post(&net.OpError{Op: "dial", Net: "tcp", Err: err}) }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"blocked", dial(fmt.Errorf("%w: 127.0.0.1 is loopback", ErrBlockedAddress)), ClassBlocked},
		{"circuit open", fmt.Errorf("%w: example.com:443", ErrCircuitOpen), ClassCircuitOpen},
		{"endpoint circuit open", &CircuitOpenError{Scope: scopeEndpoint}, ClassCircuitOpen},
		{"host circuit open", fmt.Errorf("post: %w", &CircuitOpenError{Scope: scopeHost}), ClassCircuitOpen},
		{"headers too large", post(errors.New("net/http: server response headers exceeded 65536 bytes; aborted")), ClassResponseTooLarge},
		{"HTTP/2 headers too large", post(errors.New("http2: response header list larger than advertised limit")), ClassResponseTooLarge},
		{"deadline", post(context.DeadlineExceeded), ClassTimeout},
		{"net timeout", dial(os.ErrDeadlineExceeded), ClassTimeout},
		{"dns", dial(&net.DNSError{Err: "no such host", Name: "nope.example", IsNotFound: true}), ClassDNS},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), ClassRefused},
		{"unknown authority", post(x509.UnknownAuthorityError{}), ClassTLS},
		{"reset", post(os.NewSyscallError("read", syscall.ECONNRESET)), ClassNetwork},
		// The proxy's failures are its own, whatever they wrap: a refused dial or a timeout is the
		// proxy's, not the receiver's.
		{"proxy refused", dial(&ProxyError{Proxy: "http://proxy:3128", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), ClassProxy},
		{"proxy timeout", (&tunnelState{}).blameOpening("http://proxy:3128", post(context.DeadlineExceeded)), ClassProxy},
		{"proxy 407", dial(&ProxyError{Proxy: "http://proxy:3128", StatusCode: 407, Status: "407 Proxy Authentication Required"}), ClassProxy},
		{"proxy 502", dial(&ProxyError{Proxy: "http://proxy:3128", StatusCode: 502, Status: "502 Bad Gateway"}), ClassProxyUpstream},
		{"proxy 504", dial(&ProxyError{Proxy: "http://proxy:3128", StatusCode: 504, Status: "504 Gateway Timeout"}), ClassProxyUpstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, msg := Classify(tt.err)
			if class != tt.want || msg == "" {
				t.Fatalf("Classify(%v) = %q, %q; want class %q", tt.err, class, msg, tt.want)
			}
			if strings.Contains(msg, "example.com/hook") {
				t.Fatalf("Classify(%v) message %q names the URL, which may carry a credential", tt.err, msg)
			}
		})
	}
	if class, msg := Classify(nil); class != "" || msg != "" {
		t.Fatalf("Classify(nil) = %q, %q", class, msg)
	}
}
