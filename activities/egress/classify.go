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
	// ClassProxy: the egress proxy failed (not reachable, its TLS, a broken or unanswered
	// CONNECT, or a refusal such as 407 for wrong credentials); the receiver was not reached.
	ClassProxy = "proxy"
	// ClassProxyUpstream: the egress proxy answered CONNECT with 502, 503 or 504, its word that
	// it could not reach the receiver.
	ClassProxyUpstream = "proxy_upstream"
)

// HoldReason names what held an exchange back. An exchange held back was not made: it is a wait,
// never a failure of its endpoint.
type HoldReason string

const (
	// HeldByHostCap: the receiver's host had its cap of exchanges in flight, and the free slots
	// went to accounts holding fewer.
	HeldByHostCap HoldReason = "host_cap"
	// HeldByEndpointCap: the endpoint had its own cap of exchanges in flight.
	HeldByEndpointCap HoldReason = "endpoint_cap"
	// HeldByRateLimit: the endpoint's rate limit had no turn free yet.
	HeldByRateLimit HoldReason = "rate_limit"
	// HeldByBreaker: a probe of the endpoint or its host was in flight, and its outcome decides.
	HeldByBreaker HoldReason = "breaker"
	// HeldByProxy: the egress proxy failed, or is down and another exchange probes it: the
	// operator's outage, not the receiver's (proxygate.go).
	HeldByProxy HoldReason = "proxy"
)

// HoldReasons are every HoldReason, in the order the docs list them.
var HoldReasons = []HoldReason{HeldByHostCap, HeldByEndpointCap, HeldByRateLimit, HeldByBreaker, HeldByProxy}

// Phrase says the reason in a few words, for the Web UI and the attempt's messages.
func (r HoldReason) Phrase() string {
	switch r {
	case HeldByHostCap:
		return "receiver host at its cap"
	case HeldByEndpointCap:
		return "endpoint at its cap"
	case HeldByRateLimit:
		return "endpoint rate limit"
	case HeldByBreaker:
		return "breaker probe in flight"
	case HeldByProxy:
		return "egress proxy down"
	}
	return string(r)
}

// HeldError refuses, without a connection, an exchange that could not have its turn within the
// time it could wait. RetryIn is an appointment, not a blind backoff: held exchanges are spread at
// about the rate their host, endpoint or rate limit frees turns.
type HeldError struct {
	Reason  HoldReason
	Host    string
	RetryIn time.Duration
	// Cause is the failure that held the exchange back, if one did (the egress proxy's), for the
	// operator's log; Error leaves it out.
	Cause error
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("held back (%s) at %s; next try in %s", e.Reason.Phrase(), e.Host, e.RetryIn.Round(time.Millisecond))
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
	var opErr *net.OpError
	var circuitErr *CircuitOpenError
	var proxyErr *ProxyError
	switch {
	// The owner reads these: they name neither the proxy's address nor its answer's body, which
	// are the operator's (ProxyError's own text, for the operator's log, names the address).
	case errors.As(err, &proxyErr) && proxyErr.upstream():
		return ClassProxyUpstream, "webhookd's egress proxy could not reach the receiver (" + proxyErr.Status + ")"
	case errors.As(err, &proxyErr):
		return ClassProxy, "webhookd's egress proxy failed, not the receiver: " + proxyErr.reason()
	case errors.Is(err, ErrBlockedAddress):
		return ClassBlocked, "the receiver's address is not public; webhookd does not connect to it"
	case errors.As(err, &circuitErr):
		if circuitErr.Scope == scopeHost {
			return ClassCircuitOpen, "the receiver's host refused connections or failed DNS repeatedly; webhookd pauses connecting to it for a while"
		}
		return ClassCircuitOpen, "this endpoint timed out, broke the connection or failed its TLS handshake repeatedly; webhookd pauses it for a while"
	case errors.Is(err, ErrCircuitOpen):
		return ClassCircuitOpen, "the receiver failed repeatedly; webhookd pauses it for a while"
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
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		// A TLS alert from the receiver, such as certificate_required when it wants a client
		// certificate (crypto/tls reports every alert it receives this way).
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
