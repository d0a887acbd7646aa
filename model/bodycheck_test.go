package model_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestDuplicateKey (issue 18): a key repeated within one object is found at any depth, with its
// path and offset; keys repeated in different objects are not duplicates; what CanonicalJSON
// refuses for other reasons (a number beyond float64, invalid UTF-8, deep nesting) passes, so a
// request body is refused for a repeated key only.
func TestDuplicateKey(t *testing.T) {
	deep := strings.Repeat(`{"a":`, model.MaxJSONDepth+10) + "1" + strings.Repeat("}", model.MaxJSONDepth+10)
	for _, tc := range []struct {
		name, in string
		path     []string
		offset   int
	}{
		{"issue 18", `{"since":"2020-01-01T00:00:00Z","since":"2021-01-01T00:00:00Z"}`, []string{"since"}, 32},
		{"nested", `{"data":{"x":1,"y":{"z":[1,{"k":1,"k":2}]}}}`, []string{"data", "y", "z", "1", "k"}, 34},
		{"escaped spelling", `{"a":1,"\u0061":2}`, []string{"a"}, 7},
		{"after a huge number and invalid UTF-8", "{\"n\":1e400,\"s\":\"\xff\",\"s\":1}", []string{"s"}, 19},
		{"invalid UTF-8 keys read as U+FFFD", "{\"a\xff\":1,\"a\xfe\":2}", []string{"a\uFFFD"}, 8},
		{"no duplicate", `{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":1}]}`, nil, 0},
		{"too deep for CanonicalJSON", deep, nil, 0},
		{"not JSON", `{"a":1,`, nil, 0},
		{"not an object", `[1,1]`, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := model.DuplicateKey([]byte(tc.in))
			var dup *model.DuplicateKeyError
			if tc.path == nil {
				if err != nil {
					t.Fatalf("DuplicateKey = %v, want nil", err)
				}
				return
			}
			if !errors.As(err, &dup) || !errors.Is(err, model.ErrDuplicateKey) {
				t.Fatalf("DuplicateKey = %v, want a *DuplicateKeyError", err)
			}
			if !slices.Equal(dup.Path, tc.path) || dup.Offset != tc.offset || dup.Key != tc.path[len(tc.path)-1] {
				t.Fatalf("DuplicateKey = %+v, want path %q at offset %d", dup, tc.path, tc.offset)
			}
		})
	}
	// CanonicalJSON keeps its own refusals and reports duplicates the same way.
	if _, err := model.CanonicalJSON([]byte(`{"a":1,"a":2}`)); !errors.Is(err, model.ErrDuplicateKey) {
		t.Fatalf("CanonicalJSON of a repeated key: %v", err)
	}
	if _, err := model.CanonicalJSON([]byte("{\"s\":\"\xff\"}")); err == nil || errors.Is(err, model.ErrDuplicateKey) {
		t.Fatalf("CanonicalJSON of invalid UTF-8: %v, want a syntax error", err)
	}
}

// TestCheckWebhookSecret (issue 18): a caller's own secret is accepted when it has the form of
// webhookd's own, 24 to 64 random bytes; the refusals name the rule and never carry the value.
func TestCheckWebhookSecret(t *testing.T) {
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	enc := func(b []byte) string { return model.SecretPrefix + base64.StdEncoding.EncodeToString(b) }
	own, err := model.NewWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []string{own, enc(random(24)), enc(random(25)), enc(random(64))} {
		if err := model.CheckWebhookSecret(ok); err != nil {
			t.Errorf("CheckWebhookSecret(%d bytes) = %v, want nil", len(ok), err)
		}
	}
	// Many random secrets of the shortest length pass: the randomness tests do not refuse them.
	for range 2000 {
		if s := enc(random(24)); model.CheckWebhookSecret(s) != nil {
			t.Fatalf("a random secret was refused: %v", model.CheckWebhookSecret(s))
		}
	}
	for _, bad := range []struct{ name, secret, says string }{
		{"issue 18's", "whsec_AAAA", "24 to 64 bytes, not 3"},
		{"no prefix", base64.StdEncoding.EncodeToString(random(32)), "must start with"},
		{"no padding", model.SecretPrefix + base64.RawStdEncoding.EncodeToString(random(32)), "standard base64"},
		{"URL-safe", model.SecretPrefix + base64.URLEncoding.EncodeToString(append(random(30), 0xfb, 0xff)), "standard base64"},
		{"non-canonical padding bits", model.SecretPrefix + strings.Repeat("QUJD", 8) + "QR==", "standard base64"},
		{"23 bytes", enc(random(23)), "not 23"},
		{"65 bytes", enc(random(65)), "not 65"},
		{"zeros", enc(make([]byte, 32)), "random bytes"},
		{"pattern", enc([]byte(strings.Repeat("\x00\x01\x02\xfe\xff\x80", 6))), "random bytes"},
		{"text", enc([]byte("Tr0ub4dor&3 correct horse battery")), "random bytes"},
	} {
		err := model.CheckWebhookSecret(bad.secret)
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: CheckWebhookSecret = %v, want an error saying %q", bad.name, err, bad.says)
			continue
		}
		if body := strings.TrimPrefix(bad.secret, model.SecretPrefix); strings.Contains(err.Error(), body) {
			t.Errorf("%s: the error %q carries the secret", bad.name, err)
		}
	}
}
