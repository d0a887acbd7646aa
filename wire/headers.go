package wire

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

// SignatureField is the field of a LayoutB body that holds SignBodyB's signature, always last.
const SignatureField = "signature"
