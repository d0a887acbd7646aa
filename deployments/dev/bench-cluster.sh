#!/usr/bin/env bash
# The tiers of `make bench-e2e` against `make cluster`'s production-shaped stack (issue 33), behind
# `make bench-cluster`: deployments/cluster/cluster.sh in a fresh temporary CLUSTER_DIR (PostgreSQL,
# a Temporal server with 4 history shards and mutual TLS at its frontend, the Web UI, webhookd as 2
# API and 2 worker replicas, or as 2 replicas of role all with CLUSTER_ROLES=all), then
# cmd/loadtest's tiers scenario: (a) raw HTTPS POSTs, (b') and (b) bare Temporal on the cluster's
# server (its client over the frontend's mutual TLS, from the TEMPORAL_* lines of cluster.env, as
# webhookd reads them), (c) webhookd end to end, publishing to the first API replica. Each tier
# reports its CPU ms per delivery per process: webhookd-api (the API replicas summed, role all's
# included), webhookd-worker (the worker replicas), temporal (the server), postgres (the postmaster
# and its backends, Temporal's and webhookd's, and its share by database: postgres/temporal,
# postgres/temporal_visibility, postgres/webhookd, postgres/other) and loadtest, and the Temporal
# server's store operations per delivery (its metrics endpoint). It prints the table at the end and
# stops the cluster on exit, Ctrl-C and TERM included.
#
#   deployments/dev/bench-cluster.sh [loadtest flags, e.g. -events 1000 -rounds 3]
#   make bench-cluster ARGS='-events 1000 -rounds 3'
#   WEBHOOKD_BIN=/path/to/webhookd deployments/dev/bench-cluster.sh   # measure another build
#   WEBHOOKD_SWEEP_INTERVAL=1s deployments/dev/bench-cluster.sh       # WEBHOOKD_* reach every replica
#   CLUSTER_ROLES=all make bench-cluster                              # role all replicas: eager starts
#   BENCH_PG_STATEMENTS=1 make bench-cluster ARGS='-tiers b,c'        # and PostgreSQL's costliest statements
#   make bench-cluster ARGS='-scenario idle -duration 30s'            # what the cluster spends idle
#   CLUSTER_HISTORY_SHARDS=1 CLUSTER_TEMPORAL_GOGC=400 make bench-cluster   # cluster.sh's settings (issue 45)
#
# Flags given here come after the script's own, so they win. It needs make cluster's programs
# (bin/temporal, bin/temporal-server, bin/temporal-sql-tool, bin/temporal-ui, or TEMPORAL_CLI,
# TEMPORAL_SERVER_BIN, ...: run make cluster once) and PostgreSQL's server binaries (make postgres);
# it builds bin/webhookd (make build) unless WEBHOOKD_BIN is given. The replicas allow loopback
# receivers, trust the loadtest's certificate and do not rate-limit the API (WEBHOOKD_RATE_LIMIT,
# 100000 unless set).
#
# Ports: CLUSTER_PORT_BASE (27200) to +31, the cluster's (see cluster.sh), apart from make cluster's
# (17200) and the dev benchmarks'; BENCH_CLUSTER_RECEIVER_PORT (CLUSTER_PORT_BASE+40), the (c) tier's
# receiver. BENCH_KEEP=1 keeps the cluster's data and logs. The pids are read once the cluster is
# up: a replica that dies and is restarted during the run is left out of the CPU figures after that.
set -euo pipefail

# Only the default binary is built: WEBHOOKD_BIN may be another checkout's, built by its owner. It is
# resolved before the cd below; cluster.sh gets it back as WEBHOOKD_BIN and unsets it itself.
webhookd=${WEBHOOKD_BIN:-}
unset WEBHOOKD_BIN
if [ -n "$webhookd" ]; then
  [ -x "$webhookd" ] || { echo "WEBHOOKD_BIN=$webhookd is not an executable" >&2; exit 1; }
  webhookd=$(realpath "$webhookd")
fi
cd "$(dirname "$0")/../.."

base=${CLUSTER_PORT_BASE:-27200}
receiver_port=${BENCH_CLUSTER_RECEIVER_PORT:-$((base + 40))}
# cluster.sh checks its own ports.
if (exec 3<>"/dev/tcp/127.0.0.1/$receiver_port") 2>/dev/null; then
  echo "port $receiver_port on 127.0.0.1 is already in use; set BENCH_CLUSTER_RECEIVER_PORT or CLUSTER_PORT_BASE" >&2
  exit 1
fi

make build
if [ -z "$webhookd" ]; then
  webhookd=$PWD/bin/webhookd
fi

# PostgreSQL runs as the postgres user when this runs as root: the directory must let it through.
work=$(mktemp -d "${TMPDIR:-/tmp}/webhookd-bench-cluster.XXXXXX")
chmod 755 "$work"
cluster_dir=$work/cluster
cluster_pid='' loadtest_pid=''
# shellcheck disable=SC2317 # called by the traps
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$loadtest_pid" ]; then
    kill -TERM "$loadtest_pid" 2>/dev/null || true
    wait "$loadtest_pid" 2>/dev/null || true
  fi
  if [ -n "$cluster_pid" ]; then
    # cluster.sh stops the replicas, the UI, Temporal and PostgreSQL in order on TERM.
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
  if [ "${BENCH_KEEP:-}" = 1 ]; then echo "data and logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$work/loadtest" ./cmd/loadtest
"$work/loadtest" -init -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" >/dev/null

# cluster.sh passes WEBHOOKD_* to every replica; the caller's own WEBHOOKD_* knobs pass through too.
export WEBHOOKD_ALLOW_PRIVATE_TARGETS=true
export WEBHOOKD_EXTRA_CA_FILE=$work/loadtest-cert.pem
# The API's per-key rate limit is not under test: the publishers must not meet it.
export WEBHOOKD_RATE_LIMIT=${WEBHOOKD_RATE_LIMIT:-100000}
# BENCH_PG_STATEMENTS=1: PostgreSQL tracks its statements, and each tier lists the costliest.
stats_args=()
if [ "${BENCH_PG_STATEMENTS:-}" = 1 ]; then
  export CLUSTER_PG_STATEMENTS=1
  stats_args=(-postgres-stats "postgres://postgres@127.0.0.1:$base/postgres?sslmode=disable")
fi

echo "== tiers on make cluster: starting a fresh cluster on ports $base-$((base + 31)) ($webhookd, $("$webhookd" version); log: $work/cluster.log)"
CLUSTER_DIR=$cluster_dir CLUSTER_PORT_BASE=$base WEBHOOKD_BIN=$webhookd \
  deployments/cluster/cluster.sh >"$work/cluster.log" 2>&1 &
cluster_pid=$!

# cluster.sh writes cluster.env once everything is ready (its own waits take up to minutes each).
deadline=$((SECONDS + 600))
until [ -f "$cluster_dir/cluster.env" ]; do
  if ! kill -0 "$cluster_pid" 2>/dev/null; then
    cluster_pid=
    echo "cluster.sh ended before the cluster was up; the end of its output:" >&2
    tail -n 30 "$work/cluster.log" >&2
    exit 1
  fi
  if ((SECONDS >= deadline)); then
    echo "the cluster was not up after 10 minutes; the end of cluster.sh's output:" >&2
    tail -n 30 "$work/cluster.log" >&2
    exit 1
  fi
  sleep 1
done
echo "   the cluster is up ($((SECONDS))s)"

# cluster.env: KEY=VALUE lines. The TEMPORAL_* ones configure the bare tiers' client (envconfig, as
# webhookd reads them: address, namespace, the client certificate, the CA and the server name).
database_url='' secret_key='' api_urls='' api_replicas='' worker_replicas=''
# (Not read with IFS='=': read drops a value's trailing '=', a base64 key's padding.)
while read -r line; do
  k=${line%%=*} v=${line#*=}
  case $k in
    TEMPORAL_UI_URL) ;;
    TEMPORAL_*) export "$k=$v" ;;
    DATABASE_URL) database_url=$v ;;
    SECRET_KEY) secret_key=$v ;;
    API_URLS) api_urls=$v ;;
    API_REPLICAS) api_replicas=$v ;;
    WORKER_REPLICAS) worker_replicas=$v ;;
  esac
done <"$cluster_dir/cluster.env"
api=${api_urls%%,*}

key=$(WEBHOOKD_DATABASE_URL=$database_url WEBHOOKD_SECRET_KEY=$secret_key \
  "$webhookd" apikey create --owner-email tiers@bench.localhost --name "bench-cluster tiers" 2>>"$work/cluster.log" | tail -n 1)

# The programs' own pids (the supervisor loops exec them through setsid, env and setpriv).
pid_of() { cat "$cluster_dir/pids/$1.pid"; }
# pids_of <names, separated by commas> is their pids, so separated.
pids_of() {
  local name out=()
  for name in ${1//,/ }; do out+=("$(pid_of "$name")"); done
  local IFS=,
  echo "${out[*]}"
}
api_pids=$(pids_of "$api_replicas") worker_pids=$(pids_of "$worker_replicas")
read -ra replicas <<<"${api_replicas//,/ } ${worker_replicas//,/ }"
if [ -z "$worker_replicas" ]; then
  processes="webhookd-api: $api_replicas, API and worker in each (pids $api_pids)"
  topology="2 replicas of role all"
else
  processes="webhookd-api: $api_replicas (pids $api_pids); webhookd-worker: $worker_replicas (pids $worker_pids)"
  topology="2 API and 2 worker replicas"
fi
temporal_pid=$(pid_of temporal-server)
postgres_pid=$(pid_of postgres)
processes="$processes; temporal: the server (pid $temporal_pid); postgres: the postmaster and its backends (pid $postgres_pid)"

# In the background, so that a TERM to this script stops it at once (bash runs a trap only between
# foreground commands); its output is shown as it comes.
rc=0
"$work/loadtest" -scenario tiers -api "$api" -key "$key" -listen "127.0.0.1:$receiver_port" \
  -api-pids "$api_pids" -worker-pids "$worker_pids" -temporal-pid "$temporal_pid" -postgres-pid "$postgres_pid" \
  -temporal-metrics "http://127.0.0.1:$((base + 10))/metrics" "${stats_args[@]}" \
  -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" "$@" >"$work/tiers.out" 2>&1 &
loadtest_pid=$!
tail -n +1 -f --pid="$loadtest_pid" "$work/tiers.out" &
tail_pid=$!
wait "$loadtest_pid" || rc=$?
loadtest_pid=
wait "$tail_pid" || true

# A replica restarted during the run has another pid now: its group's figures are missing.
for name in "${replicas[@]}" temporal-server postgres; do
  if grep -q "$name exited" "$cluster_dir/logs/$name.log" 2>/dev/null; then
    echo "warning: $name exited and was restarted during the run (see $cluster_dir/logs/$name.log)" >&2
  fi
done

echo
echo "== results ($webhookd, on make cluster: Temporal server on PostgreSQL, $topology)"
echo "$processes"
# The table and what follows it.
awk '/^\| tier \|/ { p = 1 } p' "$work/tiers.out"
# Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
exit "$rc"
