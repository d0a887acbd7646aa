//go:build integration

package portal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// snippetCase is one delivery a snippet's harness verifies; Want is the verdict the snippet must give.
type snippetCase struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"` // "header" (verifyWebhook) or "body" (verifyBodySignature)
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"` // base64 of the raw body
	Want    bool              `json:"want"`
}

const (
	snippetTestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	snippetOldSecret  = "whsec_c2VjcmV0LW9mLWJlZm9yZS10aGUtcm90YXRpb24="
)

// snippetCases builds deliveries of variant v the way the activities sign them (wire's functions),
// genuine and tampered.
func snippetCases(t *testing.T, v model.Variant) []snippetCase {
	t.Helper()
	layout := v.Spec().Body
	// Canonical, as intake stores event data: what JSON.stringify writes.
	data, err := wire.CanonicalJSON([]byte(`{"email":"zoë@example.com","note":"<b>&\u2028","n":12.50,"big":1e21,"tags":["a",1]}`))
	if err != nil {
		t.Fatal(err)
	}
	occurred := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	body := wire.Body(layout, v.EventTypes()[0], data, occurred, snippetTestSecret)
	tampered := bytes.Replace(body, []byte("zoë"), []byte("zoe"), 1)
	if bytes.Equal(tampered, body) {
		t.Fatal("the tampered body is the body")
	}
	msgID := wire.MessageID(42, 7)
	headers := func(ts time.Time, secrets ...string) map[string]string {
		sig, err := wire.StandardSignature(msgID, ts, body, secrets...)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{wire.HeaderID: msgID, wire.HeaderTimestamp: strconv.FormatInt(ts.Unix(), 10), wire.HeaderSignature: sig}
	}
	now := time.Now()
	b64 := base64.StdEncoding.EncodeToString
	cases := []snippetCase{
		{Name: "genuine", Kind: "header", Secret: snippetTestSecret, Headers: headers(now, snippetTestSecret), Body: b64(body), Want: true},
		{Name: "tampered-body", Kind: "header", Secret: snippetTestSecret, Headers: headers(now, snippetTestSecret), Body: b64(tampered)},
		{Name: "wrong-secret", Kind: "header", Secret: snippetOldSecret, Headers: headers(now, snippetTestSecret), Body: b64(body)},
		// A rotation: the new secret signs first, the receiver still holds the old one.
		{Name: "rotation", Kind: "header", Secret: snippetOldSecret, Headers: headers(now, snippetTestSecret, snippetOldSecret), Body: b64(body), Want: true},
		{Name: "stale", Kind: "header", Secret: snippetTestSecret, Headers: headers(now.Add(-10*time.Minute), snippetTestSecret), Body: b64(body)},
		{Name: "future", Kind: "header", Secret: snippetTestSecret, Headers: headers(now.Add(10*time.Minute), snippetTestSecret), Body: b64(body)},
		{Name: "no-signature", Kind: "header", Secret: snippetTestSecret, Headers: map[string]string{wire.HeaderID: msgID, wire.HeaderTimestamp: strconv.FormatInt(now.Unix(), 10)}, Body: b64(body)},
	}
	if layout == wire.LayoutB {
		forged := bytes.Replace(body, []byte(`"sha256=`), []byte(`"sha256=0`), 1)
		forged = append(forged[:len(forged)-3], forged[len(forged)-2:]...) // same length, one digit changed
		cases = append(cases,
			snippetCase{Name: "body-genuine", Kind: "body", Secret: snippetTestSecret, Body: b64(body), Want: true},
			snippetCase{Name: "body-tampered", Kind: "body", Secret: snippetTestSecret, Body: b64(tampered)},
			snippetCase{Name: "body-forged-signature", Kind: "body", Secret: snippetTestSecret, Body: b64(forged)},
			snippetCase{Name: "body-wrong-secret", Kind: "body", Secret: snippetOldSecret, Body: b64(body)},
			snippetCase{Name: "body-unsigned", Kind: "body", Secret: snippetTestSecret, Body: b64(wire.LoggedBody(layout, v.EventTypes()[0], data, occurred))},
		)
	}
	return cases
}

const snippetNodeHarness = `
const cases = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
for (const c of cases) {
  const body = Buffer.from(c.body, 'base64');
  const ok = c.kind === 'body' ? verifyBodySignature(c.secret, body) : verifyWebhook(c.secret, c.headers, body);
  console.log(c.name + '=' + ok);
}
`

const snippetPythonHarness = `

if __name__ == "__main__":
    import json, sys
    for c in json.load(open(sys.argv[1])):
        body = base64.b64decode(c["body"])
        if c["kind"] == "body":
            ok = verify_body_signature(c["secret"], body)
        else:
            # Any case: frameworks differ in how they spell header names.
            ok = verify_webhook(c["secret"], {k.title(): v for k, v in (c["headers"] or {}).items()}, body)
        print(f"{c['name']}={'true' if ok else 'false'}")
`

const snippetGoHarness = `package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
)

func main() {
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cases []struct {
		Name, Kind, Secret, Body string
		Headers                  map[string]string
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	for _, c := range cases {
		body, err := base64.StdEncoding.DecodeString(c.Body)
		if err != nil {
			panic(err)
		}
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		var ok bool
		if c.Kind == "body" {
			ok = BODY(c.Secret, body)
		} else {
			ok = verifyWebhook(c.Secret, h, body)
		}
		fmt.Printf("%s=%t\n", c.Name, ok)
	}
}
`

// snippetRuntime returns the path of a runtime the snippets test needs, failing with how to install it.
func snippetRuntime(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH; the signature snippets test runs each snippet, so install it: %s", name, install)
	}
	return path
}

// TestSignatureSnippetsVerify runs every snippet of every variant with its runtime on deliveries
// signed by wire: each accepts the genuine ones and refuses the tampered, stale and forged ones.
func TestSignatureSnippetsVerify(t *testing.T) {
	runtimes := map[string]struct {
		name, install, file, harness string
	}{
		"Node.js": {"node", "apt-get install nodejs (Node.js 16 or later), or https://nodejs.org/", "check.js", snippetNodeHarness},
		"Python":  {"python3", "apt-get install python3 (3.9 or later)", "check.py", snippetPythonHarness},
		"Go":      {"go", "https://go.dev/dl/", "snippet.go", snippetGoHarness},
	}
	for _, v := range model.Variants {
		cases := snippetCases(t, v)
		casesJSON, err := json.Marshal(cases)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for _, c := range cases {
			want.WriteString(c.Name + "=" + strconv.FormatBool(c.Want) + "\n")
		}
		snippets := SignatureSnippets(v)
		if len(snippets) != len(runtimes) {
			t.Fatalf("variant %s: %d snippets, want %d", v, len(snippets), len(runtimes))
		}
		for _, s := range snippets {
			rt, ok := runtimes[s.Language]
			if !ok {
				t.Fatalf("variant %s: snippet in unknown language %q", v, s.Language)
			}
			t.Run(string(v)+"/"+s.Language, func(t *testing.T) {
				t.Parallel()
				bin := snippetRuntime(t, rt.name, rt.install)
				dir := t.TempDir()
				write := func(name, content string) {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				write("cases.json", string(casesJSON))
				var cmd *exec.Cmd
				switch rt.name {
				case "go":
					src := "package main\n\n" + s.Code
					if formatted, err := format.Source([]byte(src)); err != nil || string(formatted) != src {
						t.Fatalf("the Go snippet is not gofmt'd (err %v):\n%s", err, src)
					}
					body := "verifyBodySignature"
					if !strings.Contains(s.Code, "func verifyBodySignature(") {
						body = "func(string, []byte) bool { panic(\"no body signature\") }"
					}
					write(rt.file, src)
					write("main.go", strings.Replace(rt.harness, "BODY", body, 1))
					write("go.mod", "module snippetcheck\n\ngo 1.22\n")
					cmd = exec.CommandContext(t.Context(), bin, "run", ".", "cases.json")
				case "node":
					code := s.Code
					if !strings.Contains(code, "function verifyBodySignature(") {
						code += "\nfunction verifyBodySignature() { throw new Error('no body signature'); }\n"
					}
					write(rt.file, code+rt.harness)
					cmd = exec.CommandContext(t.Context(), bin, rt.file, "cases.json")
				default:
					code := s.Code
					if !strings.Contains(code, "def verify_body_signature(") {
						code += "\n\ndef verify_body_signature(secret, raw_body):\n    raise RuntimeError('no body signature')\n"
					}
					write(rt.file, code+rt.harness)
					cmd = exec.CommandContext(t.Context(), bin, rt.file, "cases.json")
				}
				cmd.Dir = dir
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s: %v\n%s\nsnippet:\n%s", cmd, err, stderr.String(), s.Code)
				}
				if string(out) != want.String() {
					t.Fatalf("verdicts:\n%s\nwant:\n%s\nsnippet:\n%s", out, want.String(), s.Code)
				}
			})
		}
	}
}
