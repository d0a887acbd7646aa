package activities

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

// Delivery bodies and their signatures.
//
// Variant B receivers verify by re-serializing the parsed body with JavaScript's JSON.stringify, so
// every byte we sign must be what JSON.stringify(JSON.parse(body)) gives back. CanonicalJSON brings
// event data into that form once, when the event is accepted; BodyA and BodyB then only concatenate.

// BodyA is variant A's delivery body: {"eventType":..,"data":..,"timestamp":"2006-01-02T15:04:05.000Z"} (UTC, milliseconds). data is canonical JSON already.
func BodyA(eventType string, data json.RawMessage, occurred time.Time) []byte {
	b := make([]byte, 0, len(data)+len(eventType)+64)
	b = append(b, `{"eventType":`...)
	b = model.AppendJSString(b, eventType)
	b = append(b, `,"data":`...)
	b = appendData(b, data)
	b = append(b, `,"timestamp":`...)
	b = model.AppendJSString(b, occurred.UTC().Format("2006-01-02T15:04:05.000Z"))
	return append(b, '}')
}

// BodyB is variant B's delivery body {"event":..,"timestamp":"2006-01-02T15:04:05Z","data":..,"signature":"sha256=<hex>"} (UTC, no fraction),
// the signature being HMAC-SHA256 keyed with []byte(secret) over exactly the bytes `{"event":..,"timestamp":..,"data":..}`.
func BodyB(event string, data json.RawMessage, occurred time.Time, secret string) []byte {
	b := appendUnsignedB(make([]byte, 0, len(data)+len(event)+160), event, data, occurred)
	// The receiver deletes "signature" and re-serializes, which yields the unsigned bytes above
	// because the signature is the last field.
	sig := SignBodyB(b, secret)
	b = append(b[:len(b)-1], `,"signature":`...)
	b = model.AppendJSString(b, sig)
	return append(b, '}')
}

// UnsignedBodyB is variant B's delivery body without its signature field: the bytes the signature
// covers, which the delivery log shows as what was sent.
func UnsignedBodyB(event string, data json.RawMessage, occurred time.Time) []byte {
	return appendUnsignedB(make([]byte, 0, len(data)+len(event)+64), event, data, occurred)
}

func appendUnsignedB(b []byte, event string, data json.RawMessage, occurred time.Time) []byte {
	b = append(b, `{"event":`...)
	b = model.AppendJSString(b, event)
	b = append(b, `,"timestamp":`...)
	b = model.AppendJSString(b, occurred.UTC().Format("2006-01-02T15:04:05Z"))
	b = append(b, `,"data":`...)
	b = appendData(b, data)
	return append(b, '}')
}

// appendData inserts canonical data verbatim. Empty data is written as null, as encoding/json
// marshals an empty RawMessage, so the body stays valid JSON.
func appendData(dst []byte, data json.RawMessage) []byte {
	if len(data) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, data...)
}

// SignBodyB returns "sha256=" + lowercase hex of that HMAC (BodyB uses it).
func SignBodyB(unsigned []byte, secret string) string {
	// Variant B keys with the secret string as its receivers read it, "whsec_" prefix included,
	// not with the decoded bytes Standard Webhooks uses.
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(unsigned)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// StandardSignature returns the Standard Webhooks header value "v1,<base64 std>" of HMAC-SHA256 over
// msgID + "." + timestamp(unix seconds, decimal) + "." + body, keyed with the base64-DECODED part of a "whsec_" secret.
// Several secrets (during a rotation overlap) give several space-separated signatures, current first.
func StandardSignature(msgID string, ts time.Time, body []byte, secrets ...string) (string, error) {
	if len(secrets) == 0 {
		return "", errors.New("standard signature: no secret")
	}
	signed := make([]byte, 0, len(msgID)+len(body)+24)
	signed = append(signed, msgID...)
	signed = append(signed, '.')
	signed = strconv.AppendInt(signed, ts.Unix(), 10)
	signed = append(signed, '.')
	signed = append(signed, body...)

	var header strings.Builder
	for i, secret := range secrets {
		key, err := standardKey(secret)
		if err != nil {
			// Say which secret, never what it is: errors end up in logs.
			return "", fmt.Errorf("standard signature, secret %d of %d: %w", i+1, len(secrets), err)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write(signed)
		if i > 0 {
			header.WriteByte(' ')
		}
		header.WriteString("v1,")
		header.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return header.String(), nil
}

// standardKey returns the HMAC key of a "whsec_" secret. The prefix is required so that a value of
// the wrong kind (a sealed secret, an API key) fails loudly instead of signing garbage.
func standardKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, model.SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("secret lacks the %q prefix", model.SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("secret is not standard base64: %w", err)
	}
	if len(key) == 0 {
		return nil, errors.New("secret is empty")
	}
	return key, nil
}

// MessageID is the Standard Webhooks webhook-id, stable across retries of one delivery: "msg_<eventID>_<webhookID>".
func MessageID(eventID, webhookID int64) string {
	return "msg_" + strconv.FormatInt(eventID, 10) + "_" + strconv.FormatInt(webhookID, 10)
}
