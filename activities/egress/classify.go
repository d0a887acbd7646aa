package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Error classes of a failed exchange, recorded with every failed attempt and used as a metrics
// label.
const (
	ClassTimeout          = "timeout"
	ClassRefused          = "refused"
	ClassTLS              = "tls"
	ClassBlocked          = "blocked"
	ClassDNS              = "dns"
	ClassNetwork          = "network"
	ClassCircuitOpen      = "circuit_open"
	ClassResponseTooLarge = "response_too_large"
)

// ErrCircuitOpen is wrapped by the error of an exchange refused, without a connection, because its
// receiver host failed BreakerFailures times in a row and its cool-down has not passed.
var ErrCircuitOpen = errors.New("circuit open")

// HostBusyError refuses, without a connection, an exchange whose receiver host already has
// HostConcurrency exchanges in flight. RetryIn is an appointment, not a blind backoff: refused
// exchanges are spread at about the rate the host frees its slots.
type HostBusyError struct {
	RetryIn time.Duration
}

func (e *HostBusyError) Error() string {
	return fmt.Sprintf("receiver host has too many deliveries in flight; retry in %s", e.RetryIn.Round(time.Millisecond))
}

// Classify names why an exchange failed, for the attempt log and metrics, with a message that is
// safe to show the webhook's owner. A nil error has no class.
func Classify(err error) (class, message string) {
	if err == nil {
		return "", ""
	}
	// The request's URL may carry a credential in its query; the attempt log names the URL
	// beside the error, and the message also travels in Temporal's history.
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrBlockedAddress):
		return ClassBlocked, "the receiver's address is not public; webhookd does not connect to it"
	case errors.Is(err, ErrCircuitOpen):
		return ClassCircuitOpen, "the receiver's host failed repeatedly; webhookd pauses connecting to it for a while"
	case headersTooLarge(err):
		return ClassResponseTooLarge, fmt.Sprintf("the receiver's response headers exceeded %d KiB", MaxResponseRead>>10)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout, "the receiver did not answer in time"
	case errors.As(err, &dnsErr):
		return ClassDNS, "the receiver's host name does not resolve: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRefused, "the receiver refused the connection"
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &recordErr):
		return ClassTLS, "TLS handshake failed: " + err.Error()
	}
	return ClassNetwork, "network error: " + err.Error()
}

// headersTooLarge recognizes the transport's refusal of response headers over
// MaxResponseHeaderBytes. net/http has no typed error for it, so this matches the texts of HTTP/1
// ("net/http: server response headers exceeded 65536 bytes; aborted") and HTTP/2 ("http2: response
// header list larger than advertised limit").
func headersTooLarge(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "response headers exceeded") ||
		strings.Contains(msg, "response header list larger than")
}
