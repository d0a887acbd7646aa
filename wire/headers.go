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

// reservedHeaders are the headers webhookd sets on a delivery, or that only the HTTP client may
// set: a webhook's own headers (issue 31) may not name them, nor any webhook-* (Reserved).
var reservedHeaders = map[string]bool{
	"content-type": true, "content-length": true, "host": true, "connection": true,
	"transfer-encoding": true, "user-agent": true, "x-service-event": true,
	"traceparent": true, "tracestate": true,
}

// ReservedHeader reports whether name, in any case, is one webhookd owns on a delivery or that
// would break the HTTP exchange: such a custom header is refused when saved and skipped when sent.
func ReservedHeader(name string) bool {
	lower := strings.ToLower(name)
	return reservedHeaders[lower] || strings.HasPrefix(lower, "webhook-")
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
