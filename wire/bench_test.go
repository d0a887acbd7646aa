package wire

import (
	"encoding/json"
	"testing"
	"time"
)

var benchData = []byte(`{"websiteId":7,"brandId":3,"collectDataId":"blk_1","email":"fan@example.com","phone":"+14155550123",
 "name":"Zoë <fan> & co","customFields":{"city":"Köln","2":"x"},"source":{"referrer":"https://t.co/x?a=1&b=2",
 "userAgent":"Mozilla/5.0 (X11; Linux x86_64)","ipAddress":"203.0.113.9","country":"DE"}}`)

// BenchmarkCanonicalJSON: the cost of normalizing one lead payload at intake.
func BenchmarkCanonicalJSON(b *testing.B) {
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		if _, err := CanonicalJSON(benchData); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBodyAndSignatures: building and signing one variant B body per attempt, both signatures.
func BenchmarkBodyAndSignatures(b *testing.B) {
	data, err := CanonicalJSON(benchData)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	for b.Loop() {
		body := BodyB("lead.captured", json.RawMessage(data), at, specSecret)
		if _, err := StandardSignature("msg_1_2", at, body, specSecret); err != nil {
			b.Fatal(err)
		}
	}
}
