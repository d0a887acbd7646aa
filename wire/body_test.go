package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
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

func TestSignBodyB(t *testing.T) {
	tests := []struct {
		name, secret, body, want string
	}{
		// RFC 4231-style well-known vector (key "key"), also on Wikipedia's HMAC page.
		{"known vector", "key", "The quick brown fox jumps over the lazy dog",
			"sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"},
		// Keyed with the whole secret string, prefix included: a decoded key would give another value.
		{"whsec_ prefix is part of the key", specSecret, `{"event":"x"}`,
			"sha256=" + hmacHex(t, specSecret, `{"event":"x"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SignBodyB([]byte(tt.body), tt.secret); got != tt.want {
				t.Errorf("SignBodyB = %q, want %q", got, tt.want)
			}
		})
	}
}

// hmacHex asks node for an HMAC, so that the expectation does not come from the code under test.
func hmacHex(t *testing.T, key, msg string) string {
	t.Helper()
	nodePath := requireNode(t)
	out, err := exec.Command(nodePath, "-e",
		`process.stdout.write(require("crypto").createHmac("sha256", process.argv[1]).update(process.argv[2]).digest("hex"))`,
		key, msg).Output()
	if err != nil {
		t.Fatalf("node hmac: %v", err)
	}
	return string(out)
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

func TestBodyBVerifiedByNode(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var reqs []map[string]string
	var want []string
	add := func(body []byte, secret, expect string) {
		reqs = append(reqs, map[string]string{"body": string(body), "secret": secret})
		want = append(want, expect)
	}

	add([]byte(goldenBodyB), specSecret, "ok")
	// The test must be able to fail: a body signed with another secret does not verify.
	add(BodyB("website.created", json.RawMessage(`{}`), goldenTime, specSecret), specSecret+"x", "mismatch")
	// A receiver re-serializes the whole body, so an edited body no longer verifies.
	tampered := bytes.Replace([]byte(goldenBodyB), []byte(`"websiteId":7`), []byte(`"websiteId":8`), 1)
	add(tampered, specSecret, "mismatch")
	// The key is the secret's UTF-8 bytes, whatever they are.
	add(BodyB("webhook.test", json.RawMessage(`{"ok":true}`), goldenTime, "whsec_ünïcødé-😀"), "whsec_ünïcødé-😀", "ok")

	for _, p := range append(nodeCorpus(), randomPayloads(200)...) {
		data, err := CanonicalJSON([]byte(p.in))
		if err != nil {
			t.Fatalf("%s: CanonicalJSON: %v", p.name, err)
		}
		secret := randomSecret(rng)
		occurred := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9))
		add(BodyB("website.updated", data, occurred, secret), secret, "ok")
		// Variant A has no body signature, but its body must be what a JavaScript receiver
		// re-serializes too, as Standard Webhooks signs exactly these bytes.
		bodyA := BodyA("campaign.updated", data, occurred)
		reqs = append(reqs, map[string]string{"canonical": string(bodyA)})
		want = append(want, "canonical "+string(bodyA))
	}

	got := runNode(t, reqs)
	for i := range reqs {
		var ok bool
		switch {
		case want[i] == "mismatch":
			ok = strings.HasPrefix(got[i], "mismatch ")
		case strings.HasPrefix(want[i], "canonical "):
			got[i] = "canonical " + nodeCanonical(t, got[i])
			ok = got[i] == want[i]
		default:
			ok = got[i] == want[i]
		}
		if !ok {
			t.Errorf("node on request %d (%.200q):\ngot  %.300s\nwant %.300s", i, reqs[i], got[i], want[i])
		}
	}
	t.Logf("node checked %d bodies", len(reqs))
}

func randomSecret(rng *rand.Rand) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// nodeCanonical unwraps a "canonical <JSON string>" answer of verify-signature.mjs.
func nodeCanonical(t *testing.T, line string) string {
	t.Helper()
	quoted, ok := strings.CutPrefix(line, "canonical ")
	if !ok {
		t.Errorf("node answered %.300q, want a canonical form", line)
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(quoted), &s); err != nil {
		t.Errorf("node's canonical answer %.300q: %v", quoted, err)
	}
	return s
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
