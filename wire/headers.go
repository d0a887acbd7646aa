package wire

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The Standard Webhooks headers of every delivery, both variants. HTTP header names are
// case-insensitive; these are the lower-case spellings that Node.js and the Standard Webhooks
// libraries read them by (Go's http.Header shows them as Webhook-Id and so on).
const (
	// HeaderID carries MessageID, the same on every attempt of one delivery.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the Unix seconds when the attempt was signed.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries StandardSignature: "v1,<base64>", one per signing secret.
	HeaderSignature = "webhook-signature"
	// HeaderSequence carries an ordered webhook's delivery's number in its lane (docs/ordering.md):
	// 1 for the lane's first event, then one more for each event the lane is given, in the order
	// intake accepted them. Sent only by ordered webhooks.
	HeaderSequence = "webhook-sequence"
	// HeaderResend is "true" on an ordered webhook's attempt of a delivery that was delivered
	// before (a resend): its number is behind the lane's, and that is no violation of the order.
	HeaderResend = "webhook-resend"
)

// DeliveryHeader is what every delivery of eventType carries before its signature is added:
// Content-Type, User-Agent, X-Service-Event, webhook-id (msgID) and webhook-timestamp (signedAt, in
// Unix seconds). The delivery activity and `webhookd listen` both send it, so a receiver developed
// against one sees what the other sends.
func DeliveryHeader(msgID, eventType, userAgent string, signedAt time.Time) http.Header {
	h := http.Header{
		"Content-Type":    {"application/json"},
		"User-Agent":      {userAgent},
		"X-Service-Event": {eventType},
	}
	h.Set(HeaderID, msgID)
	h.Set(HeaderTimestamp, strconv.FormatInt(signedAt.Unix(), 10))
	return h
}

// SignatureField is the field of a LayoutB body that holds SignBodyB's signature, always last.
const SignatureField = "signature"

// Why a webhook's own header (issue 31) may not carry a name: the phrases of HeaderRefusal.
const (
	refusedOwned      = "webhookd sets this header itself"
	refusedClient     = "Go's HTTP client sets this header itself from the request"
	refusedConnection = "this header concerns the connection, not the receiver: Go's HTTP client drops it or fails the request, and an HTTP/2 receiver may refuse it"
	refusedProxy      = "this header is addressed to a proxy, not the receiver"
	refusedContent    = "Content-* headers describe the body, which webhookd makes: JSON, not compressed"
	refusedExpect     = "this header would make the request wait for 100 Continue, or be refused with 417"
	refusedEncoding   = "Go's HTTP client asks for gzip itself and decompresses the answer, which the attempt log keeps"
	refusedDate       = "a fixed Date would be false on every attempt; webhook-timestamp carries the attempt's time"
)

// reservedHeaders are, by lower-case name, the headers a webhook's own may not name (issue 41 added
// the names of HTTP itself): those webhookd sets on a delivery; those Go's client sets, drops or
// refuses, which the attempt log would show as sent when they were not; and those that would
// change what the request means. Any content-* and webhook-* are refused as well (HeaderRefusal).
var reservedHeaders = map[string]string{
	"content-type": refusedOwned, "user-agent": refusedOwned, "x-service-event": refusedOwned,
	"traceparent": refusedOwned, "tracestate": refusedOwned,
	"host": refusedClient, "content-length": refusedClient,
	"connection": refusedConnection, "keep-alive": refusedConnection, "proxy-connection": refusedConnection,
	"te": refusedConnection, "trailer": refusedConnection, "transfer-encoding": refusedConnection, "upgrade": refusedConnection,
	"proxy-authorization": refusedProxy, "proxy-authenticate": refusedProxy,
	"expect": refusedExpect, "accept-encoding": refusedEncoding, "date": refusedDate,
}

// HeaderRefusal says why a webhook's own header may not be called name (in any case), "" if it
// may: such a header is refused when saved, and skipped when sent (and then not in the attempt
// log) if one was stored before the rule.
func HeaderRefusal(name string) string {
	lower := strings.ToLower(name)
	switch {
	case reservedHeaders[lower] != "":
		return reservedHeaders[lower]
	case strings.HasPrefix(lower, "webhook-"):
		return refusedOwned
	case strings.HasPrefix(lower, "content-"):
		return refusedContent
	}
	return ""
}

// ReservedHeader reports whether a webhook's own header may not be called name (HeaderRefusal).
func ReservedHeader(name string) bool {
	return HeaderRefusal(name) != ""
}

// Redacted is what every representation of a webhook's custom header shows instead of its value:
// "••••" and the value's last 4 characters when it has at least 12 (enough left hidden to be of no
// use), "••••••••" otherwise. The attempt log records the same.
func Redacted(value string) string {
	const mask = "••••"
	if utf8.RuneCountInString(value) < 12 {
		return mask + mask
	}
	r := []rune(value)
	return mask + string(r[len(r)-4:])
}
