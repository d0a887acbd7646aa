//go:build integration

package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

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

func TestCanonicalJSONMatchesNode(t *testing.T) {
	cases := append(nodeCorpus(), randomPayloads(200)...)
	var reqs []map[string]string
	type check struct {
		name, what, in, want string
	}
	var checks []check
	for _, p := range cases {
		got, err := CanonicalJSON([]byte(p.in))
		if err != nil {
			t.Fatalf("%s: CanonicalJSON(%.200q): %v", p.name, p.in, err)
		}
		if !utf8.Valid(got) {
			t.Errorf("%s: output is not valid UTF-8: %q", p.name, got)
		}
		want := string(got)
		if !p.lossy {
			reqs = append(reqs, map[string]string{"canonical": p.in})
			checks = append(checks, check{p.name, "JSON.stringify(JSON.parse(input))", p.in, want})
		}
		// What we deliver must survive a receiver's parse and re-serialization unchanged.
		reqs = append(reqs, map[string]string{"canonical": string(got)})
		checks = append(checks, check{p.name, "JSON.stringify(JSON.parse(output))", string(got), want})
	}

	got := runNode(t, reqs)
	for i, c := range checks {
		if node := nodeCanonical(t, got[i]); node != c.want {
			t.Errorf("%s: %s differs for input %.300q\nnode %.400q\ngo   %.400q", c.name, c.what, c.in, node, c.want)
		}
	}
	t.Logf("compared %d CanonicalJSON outputs with node (%d payloads)", len(checks), len(cases))
}

// requireNode finds node. Receivers verify with JavaScript, so these tests are the point of the
// canonical form and must not be skipped.
func requireNode(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (Node.js) is required to check signatures the way receivers do, and was not found on PATH: %v", err)
	}
	return path
}

// runNode sends all requests to one node process and returns its answer lines, one per request.
func runNode(t *testing.T, reqs []map[string]string) []string {
	t.Helper()
	requireNode(t)
	var in bytes.Buffer
	for _, r := range reqs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal node request: %v", err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", filepath.Join("testdata", "verify-signature.mjs"))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify-signature.mjs: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(reqs) {
		t.Fatalf("node answered %d lines to %d requests\n%s", len(lines), len(reqs), stderr.String())
	}
	return lines
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
