#!/usr/bin/env bash
# The development stack behind `make run`: a Temporal dev server with its Web UI, webhookd on top of
# it, a fresh dev API key, a link to the owner's portal, and copy-paste curl commands for both API
# variants. Ctrl-C stops it all.
set -euo pipefail
# WEBHOOKD_BIN runs another build (the tests use it); webhookd itself refuses unknown WEBHOOKD_
# variables, so it is taken out of the environment.
webhookd=$(realpath "${WEBHOOKD_BIN:-$(dirname "$0")/../../bin/webhookd}")
unset WEBHOOKD_BIN
cd "$(dirname "$0")/../.."

data=${WEBHOOKD_DATA_DIR:-.data}
addr=${WEBHOOKD_HTTP_ADDR:-127.0.0.1:8080}
temporal_addr=${TEMPORAL_ADDRESS:-127.0.0.1:7233}
temporal_port=${temporal_addr##*:}
ui_port=${TEMPORAL_UI_PORT:-8233}
mkdir -p "$data"

pids=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
# Ctrl-C or a TERM exits at once (through cleanup); only a process dying on its own reaches the
# message at the end.
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in "$temporal_port" "$ui_port" "${addr##*:}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port on 127.0.0.1 is already in use; stop what holds it (another make run?) and retry" >&2
    exit 1
  fi
done

echo "starting Temporal dev server (log: $data/temporal.log)"
# Appended to, not truncated by its writer: devtemporal below appends to the same log, and a writer
# at its own offset (>) overwrote devtemporal's line with the server's banner, printed a moment
# after the server first answered (TestMakeRunStopsQuietlyOnCtrlC failed on it once).
: >"$data/temporal.log"
deployments/dev/temporal-dev.sh "$webhookd" "$temporal_port" "$ui_port" "$data/temporal.db" \
  --namespace "${TEMPORAL_NAMESPACE:-default}" >>"$data/temporal.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 120); do
  bin/temporal operator cluster health --address "$temporal_addr" >/dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "Temporal dev server exited; see $data/temporal.log" >&2; tail -20 "$data/temporal.log" >&2; exit 1; }
  sleep 0.5
done
# The visibility indexes nothing uses go (cmd/devtemporal, deployments/dev/temporal-dev.sh). A
# failure, or a refusal of a CLI other than the pinned one, costs the dev server some CPU, never the
# stack: warn and go on.
bin/devtemporal trim-visibility -cli bin/temporal "$data/temporal.db" 2>>"$data/temporal.log" ||
  { echo "warning: the dev server's visibility table was not trimmed (it works, with more CPU per workflow); see $data/temporal.log:" >&2; tail -1 "$data/temporal.log" >&2; }

key=$("$webhookd" apikey create --owner-email "${WEBHOOKD_DEV_OWNER:-dev@localhost}" --name "make run" | tail -n 1)

echo "starting webhookd (log: $data/webhookd.log)"
"$webhookd" serve >"$data/webhookd.log" 2>&1 &
pids+=($!)

# Readiness over bash's /dev/tcp: the stack needs nothing but Go installed.
ready() {
  (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}" &&
    printf 'GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n' "$addr" >&3 &&
    head -n 1 <&3 | grep -q ' 200 ') 2>/dev/null
}
for _ in $(seq 1 120); do
  ready && break
  kill -0 "${pids[1]}" 2>/dev/null || { echo "webhookd exited; see $data/webhookd.log" >&2; tail -20 "$data/webhookd.log" >&2; exit 1; }
  sleep 0.5
done

# The dev server starts its Web UI beside the frontend; the banner promises it, so wait for it too.
for _ in $(seq 1 60); do
  (exec 3<>"/dev/tcp/127.0.0.1/$ui_port") 2>/dev/null && break
  sleep 0.5
done

base="http://$addr"
owner=${WEBHOOKD_DEV_OWNER:-dev@localhost}
# A link that opens once, within the hour; with WEBHOOKD_PORTAL=false the command says why not.
portal=$("$webhookd" portal-link --owner-email "$owner" 2>&1 | tail -n 1) || portal="none: $portal"
cat <<BANNER

webhookd is up.
  API:             $base   (OpenAPI: $base/openapi.yaml, metrics: $base/metrics)
  Temporal Web UI: http://127.0.0.1:$ui_port
  Dev API key:     $key
  Owner's portal:  $portal
                   (variant B's webhooks; opens once, within an hour; another: bin/webhookd portal-link --owner-email $owner [--variant A])

Variant A (campaigns, x-api-key):
  curl -s -X POST $base/api/svc/v2/webhooks -H 'x-api-key: $key' -H 'Content-Type: application/json' -d '{"url":"https://example.com/hooks","eventType":"campaign.created"}'
  curl -s $base/api/svc/v2/webhooks -H 'x-api-key: $key'
  curl -s -X PUT $base/api/svc/v2/webhooks/1 -H 'x-api-key: $key' -H 'Content-Type: application/json' -d '{"url":"https://example.com/hooks/v2"}'
  curl -s -X DELETE $base/api/svc/v2/webhooks/1 -H 'x-api-key: $key'

Variant B (websites and fans, Bearer):
  curl -s -X POST $base/v2/svc/v2/webhooks -H 'Authorization: Bearer $key' -H 'Content-Type: application/json' -d '{"url":"https://example.com/hooks","eventType":"lead.captured"}'
  curl -s $base/v2/svc/v2/webhooks -H 'Authorization: Bearer $key'
  curl -s -X PUT $base/v2/svc/v2/webhooks/2 -H 'Authorization: Bearer $key' -H 'Content-Type: application/json' -d '{"url":"https://example.com/hooks/v2"}'
  curl -s -X DELETE $base/v2/svc/v2/webhooks/2 -H 'Authorization: Bearer $key'

(Use the id each create returns.) Logs: $data/webhookd.log, $data/temporal.log. Ctrl-C stops everything.
BANNER

# Stop everything as soon as either process dies.
wait -n "${pids[@]}" || true
echo "a process exited; see $data/webhookd.log and $data/temporal.log" >&2
