#!/usr/bin/env bash
# Issue 18's list-read burst on a real process (docs/performance-history.md, "Memory of list
# reads"): one `webhookd serve --role api` on a fresh SQLite database, with Temporal pointing
# nowhere (events are still accepted and stored), 200 events of about 255 KB published to variant A,
# then 20 concurrent `GET /api/svc/v2/events?limit=200`. It prints webhookd's VmRSS before the
# burst, its peak (VmHWM, reset just before the burst) and its VmRSS 5 s after, in MB.
#
#   deployments/dev/bench-listmem.sh [webhookd binary]     # default bin/webhookd (make build)
#   BENCH_EVENTS=200 BENCH_EVENT_BYTES=255000 BENCH_CLIENTS=20 BENCH_PORT=18480 deployments/dev/bench-listmem.sh
#
# The default rate limit applies (20 requests/s, burst 40): publishing paces itself on 429.
set -euo pipefail
bin=${1:-bin/webhookd}
events=${BENCH_EVENTS:-200}
size=${BENCH_EVENT_BYTES:-255000}
clients=${BENCH_CLIENTS:-20}
port=${BENCH_PORT:-18480}
base=http://127.0.0.1:$port/api/svc/v2

work=$(mktemp -d)
pid=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

export WEBHOOKD_DATABASE_URL=sqlite:$work/webhookd.db WEBHOOKD_HTTP_ADDR=127.0.0.1:$port \
  WEBHOOKD_SECRET_KEY=$(head -c 32 /dev/urandom | base64) TEMPORAL_ADDRESS=127.0.0.1:1 WEBHOOKD_LOG_LEVEL=warn
"$bin" migrate >/dev/null
key=$("$bin" apikey create --owner-email bench@example.com | tail -n 1)
"$bin" serve --role api >"$work/webhookd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done

mb() { awk -v k="$1:" '$1 == k { printf "%d", $2 / 1024 }' "/proc/$pid/status"; }

name=$(head -c "$size" /dev/zero | tr '\0' x)
printf '{"eventType":"campaign.created","data":{"id":1,"name":"%s","platform":"meta","status":"active","startDate":"2026-01-01T00:00:00.000Z","endDate":"2026-02-01T00:00:00.000Z","budget":10}}' \
  "$name" >"$work/event.json"
echo "== $bin ($("$bin" version)): publishing $events events of $(stat -c %s "$work/event.json") bytes"
for i in $(seq "$events"); do
  while :; do
    status=$(curl -s -o /dev/null -w '%{http_code}' "$base/events" -H "x-api-key: $key" \
      -H 'Content-Type: application/json' --data-binary @"$work/event.json")
    [ "$status" = 429 ] || break
    sleep 0.1
  done
  [ "$status" = 202 ] || { echo "event $i: HTTP $status" >&2; exit 1; }
done

sleep 2 # the key's rate-limit bucket refills (burst 40), so the burst is answered in full
before=$(mb VmRSS)
echo 5 >"/proc/$pid/clear_refs" # VmHWM from here on
echo "== $clients concurrent GET $base/events?limit=200"
for _ in $(seq "$clients"); do
  curl -s -o /dev/null -w '%{http_code} %{size_download} bytes\n' "$base/events?limit=200" -H "x-api-key: $key" &
done | sort | uniq -c # the pipe ends when the last curl does
peak=$(mb VmHWM)
sleep 5
after=$(mb VmRSS)
printf 'RSS MB: before %s, peak %s, 5 s after %s\n' "$before" "$peak" "$after"
