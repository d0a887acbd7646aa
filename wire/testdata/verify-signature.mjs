// verify-signature.mjs checks webhookd's output the way a Node.js receiver sees it. It is run by
// the tests of package wire and worker/ with one JSON request per stdin line and answers with exactly one line each:
//
//   {"body": "<delivered body>", "secret": "whsec_..."}
//     -> "ok" or "mismatch <expected> <got>": the variant B signature check a receiver does.
//   {"standard": {"id": "...", "timestamp": "...", "signature": "v1,... v1,..."}, "body": "...", "secret": "whsec_..."}
//     -> "ok" or "mismatch": the Standard Webhooks header check (webhook-id, webhook-timestamp,
//        webhook-signature), as its reference libraries make it: HMAC-SHA256 keyed with the
//        secret's base64 bytes over "id.timestamp.body", any of the space-separated v1 signatures.
//   {"canonical": "<JSON text>"}
//     -> "canonical <JSON string of JSON.stringify(JSON.parse(text))>", the bytes a receiver
//        re-serializes, quoted once more so that the answer stays on one line.
//
// Anything that throws answers "error <message>" instead, so the lines never go out of step.
import crypto from 'node:crypto';

function verify(body, secret) {
  const o = JSON.parse(body);
  const sig = o.signature;
  delete o.signature;
  const mac = 'sha256=' + crypto.createHmac('sha256', secret).update(JSON.stringify(o)).digest('hex');
  const got = Buffer.from(typeof sig === 'string' ? sig : String(sig));
  const want = Buffer.from(mac);
  // timingSafeEqual throws on different lengths; a receiver checks the length first.
  if (got.length === want.length && crypto.timingSafeEqual(got, want)) {
    return 'ok';
  }
  return `mismatch ${mac} ${sig}`;
}

function verifyStandard(std, body, secret) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const want = Buffer.from(crypto.createHmac('sha256', key).update(`${std.id}.${std.timestamp}.${body}`).digest('base64'));
  for (const part of String(std.signature).split(' ')) {
    const [version, sig] = part.split(',');
    const got = Buffer.from(sig || '');
    if (version === 'v1' && got.length === want.length && crypto.timingSafeEqual(got, want)) {
      return 'ok';
    }
  }
  return 'mismatch';
}

function answer(line) {
  try {
    const req = JSON.parse(line);
    if (typeof req.canonical === 'string') {
      return 'canonical ' + JSON.stringify(JSON.stringify(JSON.parse(req.canonical)));
    }
    if (req.standard && typeof req.body === 'string' && typeof req.secret === 'string') {
      return verifyStandard(req.standard, req.body, req.secret);
    }
    if (typeof req.body === 'string' && typeof req.secret === 'string') {
      return verify(req.body, req.secret);
    }
    return 'error unknown request';
  } catch (e) {
    return 'error ' + String(e && e.message);
  }
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const out = [];
  for (const line of input.split('\n')) {
    if (line !== '') {
      out.push(answer(line).replace(/[\r\n]/g, ' '));
    }
  }
  process.stdout.write(out.map((l) => l + '\n').join(''));
});
