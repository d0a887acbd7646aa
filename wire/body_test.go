package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// specSecret and the vector below come from the Standard Webhooks specification's test suite.
const specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestStandardSignature(t *testing.T) {
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	const msgID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	// The second value was computed with Node's crypto, independently of this package.
	const rotated = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

	tests := []struct {
		name    string
		secrets []string
		want    string
	}{
		{"spec vector", []string{specSecret}, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"rotation overlap, current first", []string{specSecret, rotated},
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,78nXHjpFP0tVJQW5D0SBwmVyyW87BV/rL6MgfM/Bw44="},
		{"rotation overlap, other order", []string{rotated, specSecret},
			"v1,78nXHjpFP0tVJQW5D0SBwmVyyW87BV/rL6MgfM/Bw44= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StandardSignature(msgID, ts, body, tt.secrets...)
			if err != nil {
				t.Fatalf("StandardSignature: %v", err)
			}
			if got != tt.want {
				t.Errorf("StandardSignature = %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("timestamp is unix seconds whatever the zone", func(t *testing.T) {
		got, err := StandardSignature(msgID, ts.In(time.FixedZone("X", -7*3600)).Add(999*time.Millisecond), body, specSecret)
		if err != nil {
			t.Fatalf("StandardSignature: %v", err)
		}
		if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
			t.Errorf("StandardSignature = %q, want %q", got, want)
		}
	})
}

func TestStandardSignatureRejectsBadSecrets(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
	}{
		{"no secret", nil},
		{"no whsec_ prefix", []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		{"not base64", []string{"whsec_not*base64"}},
		{"empty key", []string{"whsec_"}},
		{"second secret bad", []string{specSecret, "v1:sealed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StandardSignature("msg_1_2", time.Unix(1, 0), []byte("{}"), tt.secrets...)
			if err == nil {
				t.Fatalf("StandardSignature = %q, want an error", got)
			}
			for _, s := range tt.secrets {
				if s != "" && strings.Contains(err.Error(), s) {
					t.Errorf("error %q reveals the secret", err)
				}
			}
		})
	}
}

func TestStandardSignatureMessageID(t *testing.T) {
	tests := []struct {
		event, webhook int64
		want           string
	}{
		{1, 2, "msg_1_2"},
		{9007199254740993, 42, "msg_9007199254740993_42"},
	}
	for _, tt := range tests {
		if got := MessageID(tt.event, tt.webhook); got != tt.want {
			t.Errorf("MessageID(%d, %d) = %q, want %q", tt.event, tt.webhook, got, tt.want)
		}
	}
}

var goldenTime = time.Date(2024, 3, 5, 14, 7, 9, 123456789, time.FixedZone("CET", 3600))

func TestBodyA(t *testing.T) {
	tests := []struct {
		name, eventType, data string
		occurred              time.Time
		want                  string
	}{
		{
			name:      "campaign",
			eventType: "campaign.sent",
			data:      `{"campaignId":42,"name":"Spring <sale> & more","stats":{"sent":1000,"rate":0.25}}`,
			occurred:  goldenTime,
			want: `{"eventType":"campaign.sent","data":{"campaignId":42,"name":"Spring <sale> & more",` +
				`"stats":{"sent":1000,"rate":0.25}},"timestamp":"2024-03-05T13:07:09.123Z"}`,
		},
		{
			name:      "whole second keeps .000, and empty data is null",
			eventType: "campaign.created",
			occurred:  time.Date(2024, 12, 31, 23, 59, 59, 0, time.UTC),
			want:      `{"eventType":"campaign.created","data":null,"timestamp":"2024-12-31T23:59:59.000Z"}`,
		},
		{
			name:      "type is quoted as JSON.stringify quotes",
			eventType: "a\"b\\c\x01<",
			data:      `[]`,
			occurred:  time.Date(2024, 1, 2, 3, 4, 5, 999999999, time.UTC),
			want:      `{"eventType":"a\"b\\c\u0001<","data":[],"timestamp":"2024-01-02T03:04:05.999Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BodyA(tt.eventType, json.RawMessage(tt.data), tt.occurred)
			if string(got) != tt.want {
				t.Errorf("BodyA =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// goldenBodyB's signature was computed with Node's crypto over JSON.stringify of the body
// without "signature", independently of this package.
const goldenBodyB = "{\"event\":\"website.created\",\"timestamp\":\"2024-03-05T13:07:09Z\"," +
	"\"data\":{\"websiteId\":7,\"url\":\"https://example.com/a?b=1&c=2\",\"title\":\"Café <b>\u2028 😀\",\"tabs\":\"\\t\"}," +
	"\"signature\":\"sha256=7a70a4aee16791c5e23531965b322d971bd8274789236ebf06be20a37700506f\"}"

func TestBodyB(t *testing.T) {
	data, err := CanonicalJSON([]byte(`{ "websiteId": 7, "url": "https:\/\/example.com/a?b=1&c=2",
		"title": "Caf\u00e9 \u003cb\u003e\u2028 \ud83d\ude00", "tabs": "\u0009" }`))
	if err != nil {
		t.Fatalf("CanonicalJSON: %v", err)
	}
	got := BodyB("website.created", data, goldenTime, specSecret)
	if string(got) != goldenBodyB {
		t.Errorf("BodyB =\n%s\nwant\n%s", got, goldenBodyB)
	}

	// The signature covers exactly the body before it, closed where the signature begins.
	unsigned := `{"event":"website.created","timestamp":"2024-03-05T13:07:09Z","data":` + string(data) + `}`
	suffix := `,"signature":"` + SignBodyB([]byte(unsigned), specSecret) + `"}`
	if string(got) != strings.TrimSuffix(unsigned, "}")+suffix {
		t.Errorf("BodyB = %s, want %s signed as %s", got, unsigned, suffix)
	}
}

// TestChatBody: a chat's text escapes &, < and > as Slack's incoming webhooks ask (&amp;, &lt;,
// &gt;, & first so that an escape is never escaped again), and nothing else: quotes, non-ASCII and
// a line break stay as JSON writes them.
func TestChatBody(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"webhook 1 is failing", `{"text":"webhook 1 is failing"}`},
		{"https://r.example.com/?a=1&b=2", `{"text":"https://r.example.com/?a=1&amp;b=2"}`},
		{"<html> & </html>", `{"text":"&lt;html&gt; &amp; &lt;/html&gt;"}`},
		{"already &amp; escaped", `{"text":"already &amp;amp; escaped"}`},
		{"\"Köln\"\n'x' * _y_ `z`", `{"text":"\"Köln\"\n'x' * _y_ ` + "`z`" + `"}`},
	} {
		if got := string(ChatBody(c.text)); got != c.want {
			t.Errorf("ChatBody(%q) = %s, want %s", c.text, got, c.want)
		}
	}
}
