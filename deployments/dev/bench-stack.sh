#!/usr/bin/env bash
# shellcheck shell=bash
# The throwaway stack of the benchmark scripts (bench-isolation.sh, bench-e2e.sh, bench-kill.sh),
# sourced by them after `set -euo pipefail`: it resolves WEBHOOKD_BIN, moves to the repository root,
# checks the BENCH_*_PORT ports, builds bin/webhookd and loadtest (into $work, with its certificate),
# exports what webhookd needs, and defines start_stack, start_temporal, start_webhookd and
# stop_stack. Everything stops on exit; BENCH_KEEP=1 keeps the data and logs.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443), BENCH_HANGING_PORT (19444), BENCH_OTLP_PORT (14318). webhookd runs on SQLite in the stack's
# directory unless BENCH_DATABASE_URL names another (an empty PostgreSQL database; webhookd then
# needs WEBHOOKD_SECRET_KEY too), or BENCH_POSTGRES=1 starts a throwaway cluster for it. Run one
# scenario per database: the stack does not empty it.
#
# BENCH_SQLITE_SYNCHRONOUS=full runs webhookd's SQLite with synchronous=FULL instead of NORMAL
# (docs/operations.md, "Durability"); BENCH_PG_ARGS adds arguments to the stack's postgres
# (BENCH_PG_ARGS='-c synchronous_commit=off' measures what durability costs; never a default).
#
# BENCH_TRACING=1 (or a sampling ratio such as 0.01) runs webhookd with tracing on, sampled at that
# ratio (parentbased_traceidratio), exporting to the discarding OTLP sink that the loadtest serves
# on BENCH_OTLP_PORT: pass it $otlp_sink_flag. Unset or off, webhookd traces nothing. Only webhookd
# gets these OTEL_* variables; OTEL_* of the caller's environment reach every process, as WEBHOOKD_*.

# Only the default binary is built: WEBHOOKD_BIN may be another checkout's, built by its owner. It
# is resolved before the cd below, and unset because webhookd refuses WEBHOOKD_ variables it does
# not know.
webhookd=${WEBHOOKD_BIN:-}
unset WEBHOOKD_BIN
if [ -n "$webhookd" ]; then
  [ -x "$webhookd" ] || { echo "WEBHOOKD_BIN=$webhookd is not an executable" >&2; exit 1; }
  webhookd=$(realpath "$webhookd")
fi
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

temporal_port=${BENCH_TEMPORAL_PORT:-17233}
ui_port=${BENCH_UI_PORT:-18233}
http_port=${BENCH_HTTP_PORT:-18080}
healthy_port=${BENCH_HEALTHY_PORT:-19443}
hanging_port=${BENCH_HANGING_PORT:-19444}
otlp_port=${BENCH_OTLP_PORT:-14318}

tracing_env=()
otlp_sink_flag=()
case ${BENCH_TRACING:-off} in
  off | 0) ;;
  *)
    if ! awk -v r="$BENCH_TRACING" 'BEGIN { exit !(r ~ /^(1|0?\.[0-9]+|1\.0*)$/ && r > 0 && r <= 1) }'; then
      echo "BENCH_TRACING=$BENCH_TRACING: want off, or a sampling ratio above 0 up to 1 (1, 0.01)" >&2
      exit 2
    fi
    tracing_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp_port" OTEL_TRACES_SAMPLER=parentbased_traceidratio
      OTEL_TRACES_SAMPLER_ARG="$BENCH_TRACING")
    otlp_sink_flag=(-otlp-sink "127.0.0.1:$otlp_port")
    ;;
esac

for port in "$temporal_port" "$ui_port" "$http_port" "$healthy_port" "$hanging_port" "$otlp_port"; do
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
  if [ -n "${pg_pid:-}" ]; then
    kill -TERM "$pg_pid" 2>/dev/null || true
    wait "$pg_pid" 2>/dev/null || true
  fi
  if [ "${BENCH_KEEP:-}" = 1 ]; then echo "data and logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# BENCH_POSTGRES=1 runs webhookd on a throwaway PostgreSQL cluster of the stack's own (port
# BENCH_PG_PORT, 15432), as the tests start theirs, and exports BENCH_DATABASE_URL, a secret key,
# and BENCH_POSTGRES_PID (the postmaster, whose CPU time the tiers report with its backends'). The
# cluster runs as make cluster's and as production should: fsync and synchronous_commit on (the
# defaults), so that no event answered 202 can be lost to a crash of PostgreSQL (issue 33).
if [ "${BENCH_POSTGRES:-}" = 1 ]; then
  pg_port=${BENCH_PG_PORT:-15432}
  if (exec 3<>"/dev/tcp/127.0.0.1/$pg_port") 2>/dev/null; then
    echo "port $pg_port on 127.0.0.1 is already in use; set BENCH_PG_PORT" >&2
    exit 1
  fi
  deployments/dev/ensure-postgres.sh >/dev/null
  pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  as_pg=()
  if [ "$(id -u)" -eq 0 ]; then
    as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --) # initdb refuses root
    chmod o+x "$work"
    mkdir -p "$work/pg" && chown postgres: "$work/pg"
  fi
  "${as_pg[@]}" "$pg_bin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 >"$work/initdb.log" 2>&1 ||
    { echo "initdb failed; see $work/initdb.log" >&2; exit 1; }
  # start_postgres starts the cluster on its data, or again after a kill (bench-kill.sh's
  # BENCH_KILL_TARGET=postgres), when it replays its write-ahead log first. The killed server's
  # backends may hold its shared memory a moment longer, which refuses a start: it is tried again.
  start_postgres() {
    local try
    for try in $(seq 1 20); do
      # shellcheck disable=SC2086 # BENCH_PG_ARGS is a list of arguments
      "${as_pg[@]}" "$pg_bin/postgres" -D "$work/pg/data" -h 127.0.0.1 -p "$pg_port" -k '' \
        -c max_connections=300 ${BENCH_PG_ARGS:-} >>"$work/postgres.log" 2>&1 &
      pg_pid=$!
      for _ in $(seq 1 240); do
        if "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -U postgres; then
          export BENCH_POSTGRES_PID=$pg_pid
          return 0
        fi
        kill -0 "$pg_pid" 2>/dev/null || break
        sleep 0.5
      done
      wait "$pg_pid" 2>/dev/null || true
      sleep 0.5
    done
    echo "PostgreSQL did not start; see $work/postgres.log" >&2
    exit 1
  }
  start_postgres
  export BENCH_DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
  WEBHOOKD_SECRET_KEY=${WEBHOOKD_SECRET_KEY:-$(head -c 32 /dev/urandom | base64)}
  export WEBHOOKD_SECRET_KEY
fi

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
# data in DIR, and sets key_b and key_c (for the caller).
# shellcheck disable=SC2034
start_stack() {
  local dir=$1
  shift
  mkdir -p "$dir"
  # BENCH_DATABASE_URL measures on another database (an empty PostgreSQL one, say) instead.
  export WEBHOOKD_DATA_DIR=$dir WEBHOOKD_DATABASE_URL=${BENCH_DATABASE_URL:-sqlite:$dir/webhookd.db${BENCH_SQLITE_SYNCHRONOUS:+?synchronous=$BENCH_SQLITE_SYNCHRONOUS}}
  # Appended to (as run.sh does): devtemporal appends to the same log below.
  : >"$dir/temporal.log"
  start_temporal "$dir"
  bin/devtemporal trim-visibility -cli bin/temporal "$dir/temporal.db" 2>>"$dir/temporal.log" ||
    fail "trimming the dev server's visibility table failed" "$dir/temporal.log"

  key_b=$("$webhookd" apikey create --owner-email b@bench.localhost --name "bench B (hanging)" | tail -n 1)
  key_c=$("$webhookd" apikey create --owner-email c@bench.localhost --name "bench C (healthy)" | tail -n 1)

  start_webhookd "$dir/webhookd.log" "$@"
}

# start_temporal DIR starts the Temporal dev server on DIR/temporal.db, appending to DIR/temporal.log,
# and waits until it answers; its pid is ${pids[0]}. start_stack starts it first; bench-e2e.sh's
# lanes scenario starts it again on the same data after killing it.
start_temporal() {
  local dir=$1
  deployments/dev/temporal-dev.sh bin/webhookd "$temporal_port" "$ui_port" "$dir/temporal.db" >>"$dir/temporal.log" 2>&1 &
  pids[0]=$!
  wait_for temporal_healthy "${pids[0]}" "Temporal dev server" "$dir/temporal.log"
}

# start_webhookd LOG [VAR=value...] starts webhookd on the stack's database and ports, with the
# variables given, appending to LOG, and waits until it is ready; its pid is ${pids[1]}. start_stack
# starts it first; bench-kill.sh starts it again after killing it.
start_webhookd() {
  local log=$1
  shift
  env ${tracing_env[@]+"${tracing_env[@]}"} "$@" "$webhookd" serve >>"$log" 2>&1 &
  pids[1]=$!
  wait_for webhookd_ready "${pids[1]}" webhookd "$log"
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

# hooks_flag DEFAULT ARGS... prints the -hooks value among the loadtest flags ARGS, or DEFAULT: the
# webhooks a scenario registers, which WEBHOOKD_MAX_WEBHOOKS must allow.
hooks_flag() {
  local hooks=$1
  shift
  local args=("$@") i
  for i in "${!args[@]}"; do
    case ${args[$i]} in
      -hooks | --hooks) hooks=${args[$((i + 1))]:-$hooks} ;;
      -hooks=* | --hooks=*) hooks=${args[$i]#*=} ;;
    esac
  done
  echo "$hooks"
}

# print_results SCENARIO... prints each scenario's figures: the last paragraph of its output.
print_results() {
  echo "== results ($webhookd)"
  local s
  for s in "$@"; do
    echo "-- $s"
    awk 'BEGIN { RS = "" } { last = $0 } END { print last }' "$work/$s.out"
  done
}
