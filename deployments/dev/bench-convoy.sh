#!/usr/bin/env bash
# webhookd beside Convoy (issue 33, "the peer in the benchmark's reach"): BENCH_PAIRS (3) alternating
# pairs of webhookd's tier (c) (`make bench-e2e SCENARIO=tiers`, one round) and Convoy
# (frain-dev/convoy) measured by convoybench with the same events, publishers and HTTPS receiver
# code, then one Markdown table of every run and the medians of the pairs' ratios.
#
#   CONVOY_DIR=/work/convoy deployments/dev/bench-convoy.sh [loadtest flags, e.g. -events 200]
#   CONVOY_DIR=/work/convoy BENCH_POSTGRES=1 BENCH_PAIRS=7 deployments/dev/bench-convoy.sh
#   CONVOY_DIR=/work/convoy BENCH_CLUSTER=all deployments/dev/bench-convoy.sh   # make cluster's topology
#
# Convoy is set up once beforehand, outside the repository (docs/performance-history.md, "Beside
# Convoy (issue 33)"); nothing is fetched or built from the network here. CONVOY_DIR holds:
#   convoy        the Convoy binary (go build -o convoy ./cmd in its sources)
#   convoybench   built from convoybench.go (the shared benchmark notes)
#   convoy.env    KEY=value lines: Convoy's environment (CONVOY_*, PORT, AGENT_PORT, SSL_CERT_FILE),
#                 and CONVOYBENCH_PROJECT, CONVOYBENCH_PROJECT_KEY, CONVOYBENCH_ENDPOINT,
#                 CONVOYBENCH_CERT, CONVOYBENCH_CERT_KEY from `convoybench -mode setup`
#   convoy.json   Convoy's configuration file ({}: everything comes from the environment)
#   pg/data       its PostgreSQL cluster (PostgreSQL's defaults: fsync and synchronous_commit on),
#                 migrated and bootstrapped, and a database convoy_pristine copied from convoy right
#                 after the setup (CREATE DATABASE convoy_pristine TEMPLATE convoy): each run
#                 recreates convoy from it, so every run starts on the same data
# Each Convoy run starts its PostgreSQL (port CONVOY_DB_PORT), a Redis without persistence (port
# CONVOY_REDIS_PORT, empty each run), `convoy server` and `convoy agent`, waits 12 s after the
# agent starts (it loads subscriptions every 10 s), sends 20 events to warm up, measures, and stops
# them all.
#
# Loadtest flags given here reach the tiers after the script's own (-rounds 1), so they win;
# -events (1000) and -concurrency (16) are given to convoybench as -n and -c too. WEBHOOKD_BIN,
# BENCH_POSTGRES=1 and the other BENCH_* variables of bench-stack.sh reach the webhookd side as they
# reach `make bench-e2e`. Before each run the script waits until the CPUs are at least 90% idle over
# 3 s (vmstat), for BENCH_IDLE_WAIT seconds at most (600; then it runs and notes the idle share).
# The runs' output goes to BENCH_OUT (a new directory under TMPDIR unless set), which is kept.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

convoy_dir=${CONVOY_DIR:?set CONVOY_DIR to the directory holding convoy, convoybench, convoy.env and pg/data (docs/performance-history.md, "Beside Convoy (issue 33)")}
convoy_dir=$(realpath "$convoy_dir")
pairs=${BENCH_PAIRS:-3}
# BENCH_CLUSTER=all or split: webhookd's side is make cluster's production topology
# (deployments/dev/bench-cluster.sh: a Temporal server on PostgreSQL, replicas of role all, or API
# and worker replicas apart) instead of the dev stack.
cluster=${BENCH_CLUSTER:-}
case $cluster in
  '') topology="the dev stack ($([ "${BENCH_POSTGRES:-}" = 1 ] && echo PostgreSQL || echo SQLite))" ;;
  all) topology="make cluster, 2 replicas of role all" ;;
  split) topology="make cluster, 2 API and 2 worker replicas" ;;
  *) echo "BENCH_CLUSTER=$cluster: all or split" >&2; exit 2 ;;
esac
idle_wait=${BENCH_IDLE_WAIT:-600}
case $pairs in '' | *[!0-9]* | 0) echo "BENCH_PAIRS=$pairs: want a positive number" >&2; exit 2 ;; esac

for f in convoy convoybench; do
  [ -x "$convoy_dir/$f" ] || { echo "$convoy_dir/$f is missing or not executable" >&2; exit 1; }
done
[ -f "$convoy_dir/convoy.env" ] || { echo "$convoy_dir/convoy.env is missing" >&2; exit 1; }
[ -f "$convoy_dir/pg/data/PG_VERSION" ] || { echo "$convoy_dir/pg/data is not a PostgreSQL cluster" >&2; exit 1; }

# convoy.env: Convoy's variables go to its processes only (never to webhookd's side); the
# CONVOYBENCH_* ones are convoybench's arguments.
convoy_env=()
declare -A bench=()
while IFS= read -r line; do
  case $line in
    '' | '#'*) continue ;;
    CONVOYBENCH_*=*) bench[${line%%=*}]=${line#*=} ;;
    *=*) convoy_env+=("$line") ;;
  esac
done <"$convoy_dir/convoy.env"
for k in CONVOYBENCH_PROJECT CONVOYBENCH_PROJECT_KEY CONVOYBENCH_ENDPOINT CONVOYBENCH_CERT CONVOYBENCH_CERT_KEY; do
  [ -n "${bench[$k]:-}" ] || { echo "$convoy_dir/convoy.env has no $k (run convoybench -mode setup)" >&2; exit 1; }
done
# cenv NAME DEFAULT prints a variable of Convoy's environment.
cenv() {
  local kv
  for kv in "${convoy_env[@]}"; do
    if [ "${kv%%=*}" = "$1" ]; then echo "${kv#*=}"; return; fi
  done
  echo "$2"
}
api_port=$(cenv PORT 5005)
agent_port=$(cenv AGENT_PORT 5008)
cv_pg_port=$(cenv CONVOY_DB_PORT 5432)
cv_redis_port=$(cenv CONVOY_REDIS_PORT 6379)
receiver_port=${CONVOYBENCH_RECEIVER_PORT:-25100}

# flag_value NAME DEFAULT ARGS... prints the value of loadtest flag -NAME among ARGS, or DEFAULT.
flag_value() {
  local name=$1 value=$2
  shift 2
  local args=("$@") i
  for i in "${!args[@]}"; do
    case ${args[$i]} in
      "-$name" | "--$name") value=${args[$((i + 1))]:-$value} ;;
      "-$name="* | "--$name="*) value=${args[$i]#*=} ;;
    esac
  done
  echo "$value"
}
events=$(flag_value events 1000 "$@")
concurrency=$(flag_value concurrency 16 "$@")

pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
[ -x "$pg_bin/postgres" ] || { echo "no PostgreSQL server binaries under /usr/lib/postgresql" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
command -v vmstat >/dev/null || { echo "vmstat is missing (apt-get install procps)" >&2; exit 1; }
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --) # PostgreSQL refuses root
fi

out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-convoy.XXXXXX")}
mkdir -p "$out"
results=$out/results.tsv
: >"$results"

cv_pids=()
stop_convoy() {
  local i
  # Clients first (agent, server), then Redis, then PostgreSQL (SIGINT: fast shutdown).
  for ((i = ${#cv_pids[@]} - 1; i >= 0; i--)); do
    kill -INT "${cv_pids[$i]}" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 "${cv_pids[$i]}" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "${cv_pids[$i]}" 2>/dev/null || true
    wait "${cv_pids[$i]}" 2>/dev/null || true
  done
  cv_pids=()
}
trap 'stop_convoy' EXIT
trap 'stop_convoy; exit 130' INT TERM

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_idle: before each run, wait for idle CPUs (run_idle, run_load).
# shellcheck source=wait-idle.sh
. "deployments/dev/wait-idle.sh"

# cpu_of NAME CPU prints NAME's figure in a "name 1.23, other 4.56 (...)" CPU string, or "".
cpu_of() {
  sed -n "s/.*\(^\|, \|: \)$1 \([0-9.]*\).*/\2/p" <<<"$2" | head -n 1
}

# record SIDE PAIR RATE NAMES... CPU appends one run to the results: the CPU ms per delivery of
# each named server process and their sum (the load generator and receiver are left out of it).
record() {
  local side=$1 pair=$2 rate=$3 cpu=${*: -1} total=0 per=() name ms
  shift 3
  for name in "${@:1:$(($# - 1))}"; do
    ms=$(cpu_of "$name" "$cpu")
    per+=("$name ${ms:--}")
    total=$(awk -v t="$total" -v m="${ms:-0}" 'BEGIN { printf "%.2f", t + m }')
  done
  local joined
  joined=$(printf '%s, ' "${per[@]}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pair" "$side" "$run_load" "$run_idle" "$rate" "${joined%, }" "$total" >>"$results"
}

run_webhookd() {
  local pair=$1 log=$out/webhookd-$1.log row rate cpu
  shift
  wait_idle
  echo "== pair $pair: webhookd, tier (c) on $topology (load $run_load, $run_idle% idle)"
  # -rounds 1: one (c) per pair; the pairs are the rounds. The caller's flags come after and win.
  if [ -n "$cluster" ]; then
    # (b) beside (c) in the same run: bare Temporal on the same cluster, for (c)/(b).
    CLUSTER_ROLES=$cluster deployments/dev/bench-cluster.sh -rounds 1 -tiers b,c "$@" 2>&1 | tee "$log" ||
      { echo "webhookd's run failed; see $log" >&2; exit 1; }
  else
    make --no-print-directory bench-e2e SCENARIO=tiers ARGS="-rounds 1 $*" 2>&1 | tee "$log" ||
      { echo "webhookd's run failed; see $log" >&2; exit 1; }
  fi
  row=$(grep -E '^\| \(c\), median of' "$log" | tail -n 1 || true)
  [ -n "$row" ] || row=$(grep -E '^\| \(c\) webhookd end to end' "$log" | tail -n 1 || true)
  [ -n "$row" ] || { echo "no (c) row in $log" >&2; exit 1; }
  rate=$(awk -F'|' '{ gsub(/ /, "", $3); print $3 }' <<<"$row")
  cpu=$(awk -F'|' '{ sub(/^ +/, "", $5); sub(/ +$/, "", $5); print $5 }' <<<"$row")
  # PostgreSQL's CPU is read only on the stack's own cluster (BENCH_POSTGRES=1, or make cluster's).
  if [ "$cluster" = split ]; then
    record webhookd "$pair" "$rate" webhookd-api webhookd-worker temporal postgres "$cpu"
  elif [ -n "$cluster" ]; then
    record webhookd "$pair" "$rate" webhookd-api temporal postgres "$cpu"
  elif [ "${BENCH_POSTGRES:-}" = 1 ]; then
    record webhookd "$pair" "$rate" webhookd temporal postgres "$cpu"
  else
    record webhookd "$pair" "$rate" webhookd temporal "$cpu"
  fi
}

start_convoy() {
  local log=$1 port
  for port in "$cv_pg_port" "$cv_redis_port" "$api_port" "$agent_port" "$receiver_port"; do
    port_free "$port" || { echo "port $port on 127.0.0.1 is already in use (another Convoy run?)" >&2; exit 1; }
  done
  "${as_pg[@]}" "$pg_bin/postgres" -D "$convoy_dir/pg/data" -h 127.0.0.1 -p "$cv_pg_port" -k '' \
    -c max_connections=300 >>"$log.postgres" 2>&1 &
  cv_pids+=($!)
  cv_pg_pid=$!
  local ok=
  for _ in $(seq 1 120); do
    if "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$cv_pg_port" -U postgres; then ok=1; break; fi
    kill -0 "$cv_pg_pid" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "$ok" ] || { echo "Convoy's PostgreSQL did not start; see $log.postgres" >&2; tail -5 "$log.postgres" >&2; exit 1; }
  # Each run starts from the database as it was set up, as webhookd's side starts a fresh stack:
  # Convoy's database kept every run's events otherwise, and its PostgreSQL's CPU per delivery
  # grew with them (3.2, 5.0, 6.5 ms in three pairs), which flattered webhookd.
  local psql=("$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$cv_pg_port" -U postgres -d postgres)
  if [ "$("${psql[@]}" -A -t -c "SELECT count(*) FROM pg_database WHERE datname = 'convoy_pristine'")" = 1 ]; then
    "${psql[@]}" -c "DROP DATABASE IF EXISTS convoy" -c "CREATE DATABASE convoy TEMPLATE convoy_pristine" >>"$log.postgres" 2>&1 ||
      { echo "could not recreate Convoy's database from convoy_pristine; see $log.postgres" >&2; exit 1; }
  else
    echo "note: no convoy_pristine database in Convoy's cluster: this run continues on the previous runs' data" >&2
  fi

  redis-server --port "$cv_redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$out" \
    --dbfilename "convoy-redis-unused.rdb" >>"$log.redis" 2>&1 &
  cv_pids+=($!)
  cv_redis_pid=$!

  (cd "$convoy_dir" && exec env "${convoy_env[@]}" ./convoy server) >>"$log.server" 2>&1 &
  cv_pids+=($!)
  cv_server_pid=$!
  ok=
  for _ in $(seq 1 120); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$api_port" && printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3 | grep -q ' 200 ') 2>/dev/null; then
      ok=1
      break
    fi
    kill -0 "$cv_server_pid" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "$ok" ] || { echo "convoy server is not ready; see $log.server" >&2; tail -20 "$log.server" >&2; exit 1; }

  (cd "$convoy_dir" && exec env "${convoy_env[@]}" ./convoy agent) >>"$log.agent" 2>&1 &
  cv_pids+=($!)
  cv_agent_pid=$!
  # The agent loads the subscriptions every 10 s.
  sleep 12
  kill -0 "$cv_agent_pid" 2>/dev/null || { echo "convoy agent exited; see $log.agent" >&2; tail -20 "$log.agent" >&2; exit 1; }
}

convoybench() {
  "$convoy_dir/convoybench" -mode run -api "http://127.0.0.1:$api_port" -listen "127.0.0.1:$receiver_port" \
    -key "${bench[CONVOYBENCH_PROJECT_KEY]}" -project "${bench[CONVOYBENCH_PROJECT]}" -endpoint "${bench[CONVOYBENCH_ENDPOINT]}" \
    -cert "${bench[CONVOYBENCH_CERT]}" -cert-key "${bench[CONVOYBENCH_CERT_KEY]}" -c "$concurrency" "$@"
}

run_convoy() {
  local pair=$1 log=$out/convoy-$1.log line rate cpu
  wait_idle
  echo "== pair $pair: Convoy (load $run_load, $run_idle% idle)"
  start_convoy "$log"
  convoybench -n 20 -label "warm-up" -timeout 60s >>"$log.warmup" 2>&1 ||
    { echo "Convoy's warm-up failed; see $log.warmup" >&2; cat "$log.warmup" >&2; exit 1; }
  local rc=0
  convoybench -n "$events" -label "cv$pair" -out "$out/convoy.jsonl" \
    -pids "server=$cv_server_pid,agent=$cv_agent_pid,postgres=$cv_pg_pid,redis=$cv_redis_pid" 2>&1 | tee "$log" || rc=$?
  # The figures are taken at the last receipt; the agent may still be recording the last attempts.
  sleep 2
  stop_convoy
  [ "$rc" -eq 0 ] || { echo "convoybench failed or timed out (exit $rc); see $log" >&2; exit 1; }
  line=$(grep -E "^cv$pair: received" "$log" || true)
  rate=$(sed -n 's/.*: \([0-9.]*\) deliveries\/s$/\1/p' <<<"$line")
  cpu=$(grep -E "^cv$pair: CPU ms per delivery" "$log" | sed 's/^[^:]*: CPU ms per delivery: //' || true)
  if [ -z "$rate" ] || [ -z "$cpu" ]; then echo "no figures in $log" >&2; exit 1; fi
  record convoy "$pair" "$rate" server agent postgres redis "$cpu"
}

echo "== webhookd beside Convoy: pairs: $pairs, $events events, $concurrency publishers, webhookd on $topology; output in $out"
(cd "$convoy_dir" && env "${convoy_env[@]}" ./convoy version 2>/dev/null | tail -n 1) || true
for pair in $(seq 1 "$pairs"); do
  run_webhookd "$pair" "$@"
  run_convoy "$pair"
done

# The table, then the medians of the pairs' ratios (webhookd / Convoy).
echo
echo "| pair | side | load at start | idle % | deliveries/s | CPU ms per delivery | all server processes |"
echo "|---|---|---|---|---|---|---|"
awk -F'\t' '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$results"
awk -F'\t' '
  $1 > maxp { maxp = $1 }
  $2 == "webhookd" { wr[$1] = $5; wc[$1] = $7 }
  $2 == "convoy" { cr[$1] = $5; cc[$1] = $7 }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    n = 0
    for (p = 1; p <= maxp; p++) if ((p in wr) && (p in cr) && cr[p] > 0 && cc[p] > 0) {
      n++; rr[n] = wr[p] / cr[p]; cr2[n] = wc[p] / cc[p]; w1[n] = wr[p]; c1[n] = cr[p]; w2[n] = wc[p]; c2[n] = cc[p]
      printf "pair %s: rate ratio %.2f, CPU ratio %.2f\n", p, rr[n], cr2[n]
    }
    if (n == 0) { print "no complete pair"; exit 1 }
    printf "\n| median of %d pairs | webhookd | Convoy | webhookd / Convoy |\n|---|---|---|---|\n", n
    printf "| deliveries/s | %.1f | %.1f | %.2f |\n", median(w1, n), median(c1, n), median(rr, n)
    printf "| CPU ms per delivery, all server processes | %.2f | %.2f | %.2f |\n", median(w2, n), median(c2, n), median(cr2, n)
  }' "$results"
echo
echo "runs kept in $out"
