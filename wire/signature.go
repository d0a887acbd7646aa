package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix marks a webhook signing secret, as in Standard Webhooks and Svix. secretbox.SecretPrefix
// is the same string, where secrets are made and checked; a test in activities holds the two equal.
const SecretPrefix = "whsec_"

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
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("secret lacks the %q prefix", SecretPrefix)
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
