package portal

import (
	"strings"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// Snippet is a verification function a receiver can copy into its code, in one language.
type Snippet struct {
	// Language is the name shown above the code: "Node.js", "Python" or "Go".
	Language string
	// Code is the source: plain text, to be escaped like any other text when shown.
	Code string
}

// SignatureSnippets returns, for a webhook of variant v, a function in Node.js (built-in crypto),
// Python 3 and Go (standard library only) that verifies a delivery: the Standard Webhooks
// webhook-signature header that every delivery carries (constant-time, any of the signatures of a
// rotation, timestamp within five minutes), and, for a variant whose body signs itself (B), the
// body's signature field too. The header names and the field come from wire, where deliveries are
// made, so the snippets cannot drift from what is sent; a test runs each of them on a signed body.
func SignatureSnippets(v model.Variant) []Snippet {
	bodySigned := v.Spec().Body == wire.LayoutB
	r := strings.NewReplacer(
		"{{ID}}", wire.HeaderID, "{{TS}}", wire.HeaderTimestamp, "{{SIG}}", wire.HeaderSignature,
		"{{PREFIX}}", wire.SecretPrefix, "{{FIELD}}", wire.SignatureField,
	)
	node, python, goImports, goCode := snippetNodeHeader, snippetPythonHeader, snippetGoImportsHeader, snippetGoHeader
	if bodySigned {
		node += "\n" + snippetNodeBody
		python += "\n\n" + snippetPythonBody
		goImports = snippetGoImportsBody
		goCode += "\n" + snippetGoBody
	}
	return []Snippet{
		{Language: "Node.js", Code: r.Replace(snippetNodeRequire + node)},
		{Language: "Python", Code: r.Replace(snippetPythonImports + python)},
		{Language: "Go", Code: r.Replace(goImports + goCode)},
	}
}

const snippetNodeRequire = `const crypto = require('node:crypto');

`

const snippetNodeHeader = `// verifyWebhook checks a delivery's {{SIG}} header. rawBody is the request body as received
// (a Buffer, before any JSON parsing), headers the request's headers with lower-case names (as
// Node.js gives them), secret the endpoint's signing secret ({{PREFIX}}...).
function verifyWebhook(secret, headers, rawBody) {
  const id = headers['{{ID}}'];
  const timestamp = headers['{{TS}}'];
  const signatures = headers['{{SIG}}'];
  if (!id || !signatures || !/^[0-9]+$/.test(timestamp || '')) return false;
  // Refuse a replay of an old delivery: the timestamp is when this attempt was signed.
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 5 * 60) return false;
  const key = Buffer.from(secret.replace(/^{{PREFIX}}/, ''), 'base64');
  const expected = crypto.createHmac('sha256', key)
    .update(id + '.' + timestamp + '.').update(rawBody).digest();
  // During a secret rotation there is one signature per secret: any one may match.
  return signatures.split(' ').some((s) => {
    const [version, sig] = s.split(',');
    const given = Buffer.from(sig || '', 'base64');
    return version === 'v1' && given.length === expected.length &&
      crypto.timingSafeEqual(given, expected);
  });
}
`

const snippetNodeBody = `// verifyBodySignature checks the "{{FIELD}}" field of the body: HMAC-SHA256 keyed with the
// secret string itself ({{PREFIX}} included) over the body without that field, re-serialized. It
// always uses the current secret and has no timestamp of its own: deduplicate on {{ID}}.
function verifyBodySignature(secret, rawBody) {
  let body;
  try { body = JSON.parse(rawBody); } catch { return false; }
  const given = body !== null && typeof body === 'object' ? body['{{FIELD}}'] : undefined;
  if (typeof given !== 'string') return false;
  delete body['{{FIELD}}'];
  const expected = Buffer.from('sha256=' +
    crypto.createHmac('sha256', secret).update(JSON.stringify(body)).digest('hex'));
  const got = Buffer.from(given);
  return got.length === expected.length && crypto.timingSafeEqual(got, expected);
}
`

const snippetPythonImports = `import base64
import hashlib
import hmac
import time


`

const snippetPythonHeader = `def verify_webhook(secret: str, headers, raw_body: bytes) -> bool:
    """Checks a delivery's {{SIG}} header. raw_body is the request body as received,
    headers a mapping of the request's headers (any case), secret the endpoint's signing
    secret ({{PREFIX}}...)."""
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, timestamp, signatures = h.get("{{ID}}"), h.get("{{TS}}", ""), h.get("{{SIG}}")
    if not msg_id or not signatures or not (timestamp.isascii() and timestamp.isdigit()):
        return False
    # Refuse a replay of an old delivery: the timestamp is when this attempt was signed.
    if abs(time.time() - int(timestamp)) > 5 * 60:
        return False
    key = base64.b64decode(secret.removeprefix("{{PREFIX}}"))
    signed = f"{msg_id}.{timestamp}.".encode() + raw_body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
    # During a secret rotation there is one signature per secret: any one may match.
    for item in signatures.split(" "):
        version, _, sig = item.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode(), expected):
            return True
    return False
`

const snippetPythonBody = `def verify_body_signature(secret: str, raw_body: bytes) -> bool:
    """Checks the "{{FIELD}}" field of the body: HMAC-SHA256 keyed with the secret string
    itself ({{PREFIX}} included) over the body without that field. The field is always the
    last, so the signed bytes are the raw body with it cut out (no re-serialization, which
    would differ from JavaScript's). It always uses the current secret and has no timestamp
    of its own: deduplicate on {{ID}}."""
    marker = b',"{{FIELD}}":"'
    if not raw_body.endswith(b'"}'):
        return False
    rest = raw_body[:-2]
    cut = rest.rfind(marker)
    if cut < 0:
        return False
    mac = hmac.new(secret.encode(), rest[:cut] + b"}", hashlib.sha256)
    return hmac.compare_digest(rest[cut + len(marker):], b"sha256=" + mac.hexdigest().encode())
`

const snippetGoImportsHeader = `import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

`

const snippetGoImportsBody = `import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

`

const snippetGoHeader = `// verifyWebhook checks a delivery's {{SIG}} header. body is the request body as received,
// secret the endpoint's signing secret ({{PREFIX}}...).
func verifyWebhook(secret string, header http.Header, body []byte) bool {
	id, ts, sigs := header.Get("{{ID}}"), header.Get("{{TS}}"), header.Get("{{SIG}}")
	unix, err := strconv.ParseUint(ts, 10, 63)
	if id == "" || sigs == "" || err != nil {
		return false
	}
	// Refuse a replay of an old delivery: the timestamp is when this attempt was signed.
	if age := time.Since(time.Unix(int64(unix), 0)); age > 5*time.Minute || age < -5*time.Minute {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "{{PREFIX}}"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	expected := mac.Sum(nil)
	// During a secret rotation there is one signature per secret: any one may match.
	for _, s := range strings.Fields(sigs) {
		version, sig, _ := strings.Cut(s, ",")
		given, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1" && err == nil && hmac.Equal(given, expected) {
			return true
		}
	}
	return false
}
`

const snippetGoBody = `// verifyBodySignature checks the "{{FIELD}}" field of the body: HMAC-SHA256 keyed with the
// secret string itself ({{PREFIX}} included) over the body without that field. The field is
// always the last, so the signed bytes are the raw body with it cut out. It always uses the
// current secret and has no timestamp of its own: deduplicate on {{ID}}.
func verifyBodySignature(secret string, body []byte) bool {
	rest, ok := bytes.CutSuffix(body, []byte(` + "`" + `"}` + "`" + `))
	marker := []byte(` + "`" + `,"{{FIELD}}":"` + "`" + `)
	cut := bytes.LastIndex(rest, marker)
	if !ok || cut < 0 {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(rest[:cut])
	mac.Write([]byte("}"))
	expected := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal(rest[cut+len(marker):], []byte(expected))
}
`
