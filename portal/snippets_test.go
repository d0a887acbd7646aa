package portal

import (
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// TestSignatureSnippetsName: each snippet reads the header names wire sends, compares in constant
// time and checks the timestamp; a body-signed variant's also checks the body's field, and the
// other's does not mention one.
func TestSignatureSnippetsName(t *testing.T) {
	constantTime := map[string]string{"Node.js": "crypto.timingSafeEqual(", "Python": "hmac.compare_digest(", "Go": "hmac.Equal("}
	for _, v := range model.Variants {
		bodySigned := v.Spec().Body == wire.LayoutB
		for _, s := range SignatureSnippets(v) {
			for _, want := range []string{wire.HeaderID, wire.HeaderTimestamp, wire.HeaderSignature, wire.SecretPrefix, constantTime[s.Language], "5 * 60", "5*time.Minute"} {
				if want == "5 * 60" && s.Language == "Go" || want == "5*time.Minute" && s.Language != "Go" {
					continue
				}
				if !strings.Contains(s.Code, want) {
					t.Errorf("variant %s, %s: snippet lacks %q", v, s.Language, want)
				}
			}
			if got := strings.Contains(s.Code, `"`+wire.SignatureField+`"`); got != bodySigned {
				t.Errorf("variant %s, %s: mentions the body's %q field: %t, want %t", v, s.Language, wire.SignatureField, got, bodySigned)
			}
			if strings.Contains(s.Code, "{{") {
				t.Errorf("variant %s, %s: a placeholder is left:\n%s", v, s.Language, s.Code)
			}
		}
	}
}
