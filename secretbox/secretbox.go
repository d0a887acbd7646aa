// Package secretbox seals what webhookd keeps secret at rest (webhooks' signing secrets, custom
// header values, receiver credentials, private keys) with AES-256-GCM under the server key
// (WEBHOOKD_SECRET_KEY), opens a webhook's sealed settings for the attempt and for the owner's
// reveal, and makes and checks signing secrets.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
)

// SecretPrefix marks a webhook signing secret, as in Standard Webhooks and Svix.
const SecretPrefix = "whsec_"

// sealedPrefix versions the ciphertext format so the server key or cipher can change later.
const sealedPrefix = "v1:"

// Box encrypts webhook secrets at rest with AES-256-GCM under the server key
// (WEBHOOKD_SECRET_KEY). A stolen database dump alone does not reveal any secret.
type Box struct {
	aead cipher.AEAD
}

// New builds a Box from a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain with a fresh random nonce and returns "v1:" + base64(nonce || ciphertext).
func (b *Box) Seal(plain string) (string, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	sealed := b.aead.Seal(nonce, nonce, []byte(plain), nil)
	return sealedPrefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// WebhookSecret opens the webhook's current signing secret: for a delivery's signature, and for
// the API and the portal to show its owner.
func (b *Box) WebhookSecret(w *model.Webhook) (string, error) {
	plain, err := b.Open(w.Secret)
	if err != nil {
		return "", fmt.Errorf("open secret of webhook %d: %w", w.ID, err)
	}
	return plain, nil
}

// WebhookHeaders opens the webhook's custom headers (names and their plain values), nil for none.
// Only a delivery attempt needs the values; every other reader shows them redacted.
func (b *Box) WebhookHeaders(w *model.Webhook) (map[string]string, error) {
	if w.Headers == nil {
		return nil, nil
	}
	plain, err := b.Open(*w.Headers)
	if err != nil {
		return nil, fmt.Errorf("open headers of webhook %d: %w", w.ID, err)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(plain), &headers); err != nil {
		// The error of encoding/json could quote the plain text: leave it out.
		return nil, fmt.Errorf("open headers of webhook %d: not a JSON object of strings", w.ID)
	}
	return headers, nil
}

// WebhookTLS opens the webhook's TLS settings, nil for none. Only a delivery attempt needs the
// private key; every other reader shows the certificates and never the key.
func (b *Box) WebhookTLS(w *model.Webhook) (*model.ReceiverTLS, error) {
	if w.TLS == nil {
		return nil, nil
	}
	plain, err := b.Open(*w.TLS)
	if err != nil {
		return nil, fmt.Errorf("open tls of webhook %d: %w", w.ID, err)
	}
	var t model.ReceiverTLS
	if err := json.Unmarshal([]byte(plain), &t); err != nil {
		// The error of encoding/json could quote the plain text: leave it out.
		return nil, fmt.Errorf("open tls of webhook %d: not a JSON object", w.ID)
	}
	return &t, nil
}

// WebhookAuth opens the webhook's authentication to its receiver, nil for none. Only a delivery
// attempt needs the secrets; every other reader shows them redacted.
func (b *Box) WebhookAuth(w *model.Webhook) (*model.ReceiverAuth, error) {
	if w.Auth == nil {
		return nil, nil
	}
	plain, err := b.Open(*w.Auth)
	if err != nil {
		return nil, fmt.Errorf("open auth of webhook %d: %w", w.ID, err)
	}
	var auth model.ReceiverAuth
	if err := json.Unmarshal([]byte(plain), &auth); err != nil {
		// The error of encoding/json could quote the plain text: leave it out.
		return nil, fmt.Errorf("open auth of webhook %d: not a JSON object", w.ID)
	}
	return &auth, nil
}

// WebhookDestination opens the secrets of the webhook's destination beyond HTTP
// (docs/destinations.md), the zero value for none. Only a delivery attempt needs them; every other
// reader shows them masked.
func (b *Box) WebhookDestination(w *model.Webhook) (destination.Credentials, error) {
	var c destination.Credentials
	if w.DestinationCredentials == nil {
		return c, nil
	}
	plain, err := b.Open(*w.DestinationCredentials)
	if err != nil {
		return c, fmt.Errorf("open destination credentials of webhook %d: %w", w.ID, err)
	}
	if err := json.Unmarshal([]byte(plain), &c); err != nil {
		// The error of encoding/json could quote the plain text: leave it out.
		return c, fmt.Errorf("open destination credentials of webhook %d: not a JSON object", w.ID)
	}
	return c, nil
}

// Open decrypts a value made by Seal.
func (b *Box) Open(sealed string) (string, error) {
	raw, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", errors.New("sealed secret: unknown format")
	}
	data, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(data) < b.aead.NonceSize() {
		return "", errors.New("sealed secret: malformed")
	}
	nonce, ct := data[:b.aead.NonceSize()], data[b.aead.NonceSize():]
	plain, err := b.aead.Open(nil, nonce, ct, nil)
	if err != nil {
		return "", fmt.Errorf("sealed secret: %w", err)
	}
	return string(plain), nil
}

// NewWebhookSecret returns "whsec_" + base64 of 32 random bytes.
func NewWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// The length of a caller's own secret, decoded, as Svix accepts it: 24 bytes (192 bits) at least,
// 64 (HMAC-SHA256's block) at most.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// CheckWebhookSecret accepts a caller's own secret when it has the form of the ones webhookd makes
// ("whsec_" + standard base64, padded) of MinSecretBytes to MaxSecretBytes bytes that look random:
// not text (every byte printable ASCII: a password, base64-encoded) and not a pattern (fewer
// distinct byte values than half the length, as zeros or a repeated word give). Random bytes fail
// either test with a probability below 1e-10. The error describes the rule broken, never the value.
func CheckWebhookSecret(secret string) error {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return fmt.Errorf("must start with %q followed by the base64 of %d to %d random bytes", SecretPrefix, MinSecretBytes, MaxSecretBytes)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(encoded)
	if err != nil {
		return fmt.Errorf("must be %q followed by standard base64 (A-Z, a-z, 0-9, +, / and = padding)", SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return fmt.Errorf("must encode %d to %d bytes, not %d", MinSecretBytes, MaxSecretBytes, len(key))
	}
	text := true
	var seen [256]bool
	distinct := 0
	for _, b := range key {
		text = text && b >= 0x20 && b < 0x7f
		if !seen[b] {
			seen[b] = true
			distinct++
		}
	}
	if text || distinct < len(key)/2 {
		return errors.New("must encode random bytes (from a secure random generator), not text or a repeated pattern")
	}
	return nil
}

// NewSealedWebhookSecret makes a new webhook secret and returns it with its ciphertext.
func (b *Box) NewSealedWebhookSecret() (plain, sealed string, err error) {
	plain, err = NewWebhookSecret()
	if err != nil {
		return "", "", err
	}
	sealed, err = b.Seal(plain)
	if err != nil {
		return "", "", err
	}
	return plain, sealed, nil
}
