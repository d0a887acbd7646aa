#!/usr/bin/env bash
# The receiver isolation benchmark behind `make bench-isolation` (docs/performance.md, issue 7). For
# each scenario of cmd/loadtest it starts a throwaway stack, a Temporal dev server and webhookd on
# SQLite as run.sh does, on ports of its own so that it runs beside a `make run`, with two accounts:
# B, whose webhooks hang, and C, whose webhook is healthy. It prints the results and stops
# everything on exit.
#
#   deployments/dev/bench-isolation.sh [all|hanging|isolation|throughput] [loadtest flags, e.g. -rate 5]
#   WEBHOOKD_BIN=/path/to/webhookd deployments/dev/bench-isolation.sh     # measure another build
#   WEBHOOKD_HOST_CONCURRENCY=2 deployments/dev/bench-isolation.sh        # WEBHOOKD_* reach webhookd
#
# Each scenario gets a fresh stack, so that one's leftover deliveries do not slow the next. Flags
# given here come after the script's own, so they win.
#
# The isolation scenario is scaled to what a dev stack carries. On a 2 vCPU VM the Temporal dev
# server runs 20-50 deliveries/s, while today's worker (200 slots, 5 s attempts) runs out of slots
# only beyond 40 hanging deliveries/s. At loadtest's own defaults (10 events/s each, B with 20
# webhooks: 210 deliveries/s) C waits at least as long beside a fast B as beside a hanging one: that
# measures the dev server, not isolation. So here the worker has 20 slots (unless
# WEBHOOKD_MAX_CONCURRENT_DELIVERIES says otherwise) and B sends 10 deliveries/s: too few to slow C
# when they succeed (the control phase checks it), 2.5 times the slots when they hang.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443), BENCH_HANGING_PORT (19444). BENCH_KEEP=1 keeps the data and logs.
set -euo pipefail
# Only the default binary is built: WEBHOOKD_BIN may be another checkout's, built by its owner. It
# is resolved before the cd below, and unset because webhookd refuses WEBHOOKD_ variables it does
# not know.
webhookd=${WEBHOOKD_BIN:-}
unset WEBHOOKD_BIN
if [ -n "$webhookd" ]; then
  [ -x "$webhookd" ] || { echo "WEBHOOKD_BIN=$webhookd is not an executable" >&2; exit 1; }
  webhookd=$(realpath "$webhookd")
fi
cd "$(dirname "$0")/../.."

scenario=all
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  scenario=$1
  shift
fi
case $scenario in
  all) scenarios=(hanging isolation) ;;
  hanging | isolation | throughput) scenarios=("$scenario") ;;
  *) echo "usage: $0 [all|hanging|isolation|throughput] [loadtest flags]" >&2; exit 2 ;;
esac

temporal_port=${BENCH_TEMPORAL_PORT:-17233}
ui_port=${BENCH_UI_PORT:-18233}
http_port=${BENCH_HTTP_PORT:-18080}
healthy_port=${BENCH_HEALTHY_PORT:-19443}
hanging_port=${BENCH_HANGING_PORT:-19444}

for port in "$temporal_port" "$ui_port" "$http_port" "$healthy_port" "$hanging_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port on 127.0.0.1 is already in use (another benchmark?); set the BENCH_*_PORT variables" >&2
    exit 1
  fi
done

# This tree's build lists the search attributes even when WEBHOOKD_BIN measures an older one.
make build
if [ -z "$webhookd" ]; then
  webhookd=bin/webhookd
fi
[ -x bin/temporal ] || make bin/temporal

work=$(mktemp -d "${TMPDIR:-/tmp}/webhookd-bench.XXXXXX")
pids=()
stop_stack() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  trap - EXIT INT TERM
  stop_stack
  if [ "${BENCH_KEEP:-}" = 1 ]; then echo "data and logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

go build -o "$work/loadtest" ./cmd/loadtest
"$work/loadtest" -init -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" >/dev/null

# webhookd inherits the caller's environment, so WEBHOOKD_* knobs pass through; only where it
# listens, where it keeps its data and what the benchmark needs are set here.
export TEMPORAL_ADDRESS=127.0.0.1:$temporal_port
export TEMPORAL_NAMESPACE=default
export WEBHOOKD_HTTP_ADDR=127.0.0.1:$http_port
export WEBHOOKD_TEMPORAL_UI_URL=http://127.0.0.1:$ui_port
export WEBHOOKD_ALLOW_PRIVATE_TARGETS=true
export WEBHOOKD_EXTRA_CA_FILE=$work/loadtest-cert.pem
# The API's per-key rate limit is not under test: open-loop publishing must not meet it.
export WEBHOOKD_RATE_LIMIT=${WEBHOOKD_RATE_LIMIT:-100000}

fail() {
  echo "$1; last lines of $2:" >&2
  tail -20 "$2" >&2
  exit 1
}

# start_stack DIR [VAR=value...] starts Temporal, and webhookd with the variables given, with their
# data in DIR, and sets key_b and key_c.
start_stack() {
  local dir=$1
  shift
  mkdir -p "$dir"
  export WEBHOOKD_DATA_DIR=$dir WEBHOOKD_DATABASE_URL=sqlite:$dir/webhookd.db
  deployments/dev/temporal-dev.sh bin/webhookd "$temporal_port" "$ui_port" "$dir/temporal.db" >"$dir/temporal.log" 2>&1 &
  pids+=($!)
  wait_for temporal_healthy "${pids[0]}" "Temporal dev server" "$dir/temporal.log"

  key_b=$("$webhookd" apikey create --owner-email b@bench.localhost --name "bench B (hanging)" | tail -n 1)
  key_c=$("$webhookd" apikey create --owner-email c@bench.localhost --name "bench C (healthy)" | tail -n 1)

  env "$@" "$webhookd" serve >"$dir/webhookd.log" 2>&1 &
  pids+=($!)
  wait_for webhookd_ready "${pids[1]}" webhookd "$dir/webhookd.log"
}

# wait_for CHECK PID NAME LOG polls CHECK for a minute while process PID lives.
wait_for() {
  for _ in $(seq 1 120); do
    "$1" && return 0
    kill -0 "$2" 2>/dev/null || fail "$3 exited" "$4"
    sleep 0.5
  done
  fail "$3 is not ready after a minute" "$4"
}

temporal_healthy() {
  bin/temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1
}

# Readiness over bash's /dev/tcp, as run.sh: nothing but Go is needed.
webhookd_ready() {
  (exec 3<>"/dev/tcp/127.0.0.1/$http_port" &&
    printf 'GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n' "$WEBHOOKD_HTTP_ADDR" >&3 &&
    head -n 1 <&3 | grep -q ' 200 ') 2>/dev/null
}

status=0
for s in "${scenarios[@]}"; do
  stack_env=() args=()
  if [ "$s" = isolation ]; then
    stack_env=("WEBHOOKD_MAX_CONCURRENT_DELIVERIES=${WEBHOOKD_MAX_CONCURRENT_DELIVERIES:-20}")
    args=(-rate 2 -noisy-hooks 5 -duration 60s)
  fi
  echo "== $s: starting a fresh stack ($webhookd, $("$webhookd" version)) ${stack_env[*]}"
  start_stack "$work/$s" "${stack_env[@]}"
  rc=0
  "$work/loadtest" -scenario "$s" -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c" -noisy-key "$key_b" \
    -listen "127.0.0.1:$healthy_port" -hang-listen "127.0.0.1:$hanging_port" \
    -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" "${args[@]}" "$@" 2>&1 | tee "$work/$s.out" || rc=$?
  stop_stack
  # Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
  case $rc in 0 | 2) ;; *) status=1 ;; esac
  echo
done

echo "== results ($webhookd)"
for s in "${scenarios[@]}"; do
  echo "-- $s"
  # The last paragraph of a scenario's output is its table.
  awk 'BEGIN { RS = "" } { last = $0 } END { print last }' "$work/$s.out"
done
exit "$status"
