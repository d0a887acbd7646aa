package secretbox_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/secretbox"
)

// TestCheckWebhookSecret (issue 18): a caller's own secret is accepted when it has the form of
// webhookd's own, 24 to 64 random bytes; the refusals name the rule and never carry the value.
func TestCheckWebhookSecret(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	enc := func(b []byte) string { return secretbox.SecretPrefix + base64.StdEncoding.EncodeToString(b) }
	own, err := secretbox.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{own, enc(random(24)), enc(random(25)), enc(random(64))} {
		if err := secretbox.CheckWebhookSecret(ok); err != nil {
			t.Errorf("CheckWebhookSecret(%d bytes) = %v, want nil", len(ok), err)
		}
	}
	// Many random secrets of the shortest length pass: the randomness tests do not refuse them.
	for range 2000 {
		if s := enc(random(24)); secretbox.CheckWebhookSecret(s) != nil {
			t.Fatalf("a random secret was refused: %v", secretbox.CheckWebhookSecret(s))
		}
	}
	for _, bad := range []struct{ name, secret, says string }{
		{"issue 18's", "whsec_AAAA", "24 to 64 bytes, not 3"},
		{"no prefix", base64.StdEncoding.EncodeToString(random(32)), "must start with"},
		{"no padding", secretbox.SecretPrefix + base64.RawStdEncoding.EncodeToString(random(32)), "standard base64"},
		{"URL-safe", secretbox.SecretPrefix + base64.URLEncoding.EncodeToString(append(random(30), 0xfb, 0xff)), "standard base64"},
		{"non-canonical padding bits", secretbox.SecretPrefix + strings.Repeat("QUJD", 8) + "QR==", "standard base64"},
		{"23 bytes", enc(random(23)), "not 23"},
		{"65 bytes", enc(random(65)), "not 65"},
		{"zeros", enc(make([]byte, 32)), "random bytes"},
		{"pattern", enc([]byte(strings.Repeat("\x00\x01\x02\xfe\xff\x80", 6))), "random bytes"},
		{"text", enc([]byte("Tr0ub4dor&3 correct horse battery")), "random bytes"},
	} {
		err := secretbox.CheckWebhookSecret(bad.secret)
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: CheckWebhookSecret = %v, want an error saying %q", bad.name, err, bad.says)
			continue
		}
		if body := strings.TrimPrefix(bad.secret, secretbox.SecretPrefix); strings.Contains(err.Error(), body) {
			t.Errorf("%s: the error %q carries the secret", bad.name, err)
		}
	}
}

// TestBox: a seal is random (two of one secret differ), hides the secret, opens under its key
// and under no other.
func TestBox(t *testing.T) {
	box, err := secretbox.New(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := secretbox.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := box.Seal(secret)
	b, _ := box.Seal(secret)
	if a == b {
		t.Fatal("two seals of one secret are equal: the nonce is not random")
	}
	if strings.Contains(a, secret) || strings.Contains(a, secret[len("whsec_"):]) {
		t.Fatal("sealed value contains the secret")
	}
	if got, err := box.Open(a); err != nil || got != secret {
		t.Fatalf("Open = %q, %v", got, err)
	}
	other, _ := secretbox.New(bytes.Repeat([]byte{2}, 32))
	if _, err := other.Open(a); err == nil {
		t.Fatal("a different key opened the secret")
	}
	tampered := a[:len(a)-2] + "AA"
	if tampered != a {
		if _, err := box.Open(tampered); err == nil {
			t.Fatal("a tampered ciphertext opened")
		}
	}
	if _, err := secretbox.New([]byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
}
