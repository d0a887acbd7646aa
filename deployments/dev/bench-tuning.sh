#!/usr/bin/env bash
# Issue 45's tuning table: what each setting an operator may change on `make cluster`'s Temporal
# server does to the CPU per delivery of the server, of PostgreSQL and of webhookd, one setting at a
# time, alternating with the defaults (`make bench-cluster`, tiers (b) and (c), replicas of role
# all unless CLUSTER_ROLES says otherwise).
#
#   deployments/dev/bench-tuning.sh [knob...]          # every knob below, BENCH_PAIRS (1) pairs each
#   BENCH_PAIRS=2 deployments/dev/bench-tuning.sh shards-1 visibility-reads
#   ARGS='-events 2000' deployments/dev/bench-tuning.sh gogc-400   # loadtest flags after the script's
#
# Each pair runs the defaults, then the knob (the order flips with every pair), each on a fresh
# cluster, after waiting until the CPUs are at least 90% idle over 3 s (BENCH_IDLE_WAIT, 300 s at
# most). The runs' output is kept in BENCH_OUT (a new directory under TMPDIR unless set). At the end
# it prints one Markdown row per run: (b)/s, (c)/s, and (c)'s CPU ms per delivery by process, with
# PostgreSQL's split by database.
set -euo pipefail
cd "$(dirname "$0")/../.."

# knob NAME prints the knob's settings: environment for cluster.sh, and dynamic config lines
# (DC:key=value) that go to a file given as CLUSTER_DYNAMIC_CONFIG_EXTRA.
knob() {
  case $1 in
    defaults) ;;
    shards-1) echo CLUSTER_HISTORY_SHARDS=1 ;;
    shards-16) echo CLUSTER_HISTORY_SHARDS=16 ;;
    gogc-200) echo CLUSTER_TEMPORAL_GOGC=200 ;;
    gogc-400) echo CLUSTER_TEMPORAL_GOGC=400 ;;
    memlimit-1g) echo CLUSTER_TEMPORAL_GOGC=off CLUSTER_TEMPORAL_GOMEMLIMIT=1GiB ;;
    checkpoints-30s) echo DC:history.transferProcessorUpdateAckInterval=30s DC:history.visibilityProcessorUpdateAckInterval=30s ;;
    checkpoints-10s) echo DC:history.transferProcessorUpdateAckInterval=10s DC:history.visibilityProcessorUpdateAckInterval=10s ;;
    visibility-reads) echo DC:history.visibilityProcessorMaxPollRPS=5 DC:history.visibilityTaskBatchSize=1000 ;;
    transfer-reads) echo DC:history.transferProcessorMaxPollRPS=5 DC:history.transferTaskBatchSize=1000 ;;
    persistence-qps) echo DC:history.persistenceMaxQPS=2000 DC:frontend.persistenceMaxQPS=2000 DC:matching.persistenceMaxQPS=2000 ;;
    # Two knobs together, once each was measured alone.
    reads) echo DC:history.visibilityProcessorMaxPollRPS=5 DC:history.visibilityTaskBatchSize=1000 DC:history.transferProcessorMaxPollRPS=5 DC:history.transferTaskBatchSize=1000 ;;
    *) echo "unknown knob $1" >&2; return 1 ;;
  esac
}
all_knobs=(shards-1 shards-16 gogc-200 gogc-400 memlimit-1g checkpoints-10s checkpoints-30s visibility-reads transfer-reads persistence-qps)
knobs=("$@")
[ ${#knobs[@]} -gt 0 ] || knobs=("${all_knobs[@]}")
for k in "${knobs[@]}"; do knob "$k" >/dev/null; done

pairs=${BENCH_PAIRS:-1}
idle_wait=${BENCH_IDLE_WAIT:-300}
out=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-tuning.XXXXXX")}
mkdir -p "$out"
results=$out/results.tsv
: >"$results"
export CLUSTER_ROLES=${CLUSTER_ROLES:-all}
make build >/dev/null

# wait_idle: before each run, wait for idle CPUs (run_idle, run_load).
# shellcheck source=wait-idle.sh
. "deployments/dev/wait-idle.sh"

# run NAME PAIR: one bench-cluster run with the knob's settings.
run() {
  local name=$1 pair=$2 log=$out/$1-$2.log extra=$out/$1-$2.yaml setting envs=()
  : >"$extra"
  for setting in $(knob "$name"); do
    case $setting in
      DC:*) setting=${setting#DC:}; printf '%s:\n  - value: %s\n' "${setting%%=*}" "${setting#*=}" >>"$extra" ;;
      *) envs+=("$setting") ;;
    esac
  done
  [ -s "$extra" ] && envs+=("CLUSTER_DYNAMIC_CONFIG_EXTRA=$extra")
  wait_idle
  echo "== pair $pair: $name ${envs[*]:-} ($run_idle% idle)"
  env "${envs[@]}" deployments/dev/bench-cluster.sh -events 1000 -rounds 1 -tiers b,c ${ARGS:-} >"$log" 2>&1 ||
    { echo "the run failed; see $log" >&2; tail -5 "$log" >&2; return 1; }
  local b c
  b=$(grep -E '^\| \(b\) bare' "$log" | tail -n 1)
  c=$(grep -E '^\| \(c\) webhookd' "$log" | tail -n 1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$pair" "$name" "$run_idle" "$b" "$c" >>"$results"
  echo "   (b) $(cut -d'|' -f3 <<<"$b")/s, (c) $(cut -d'|' -f3 <<<"$c")/s: $(cut -d'|' -f5 <<<"$c")"
}

for pair in $(seq 1 "$pairs"); do
  for k in "${knobs[@]}"; do
    if [ $((pair % 2)) = 1 ]; then run defaults "$pair-$k"; run "$k" "$pair"; else run "$k" "$pair"; run defaults "$pair-$k"; fi
  done
done

echo
echo "| pair | setting | idle % | (b)/s | (b) server CPU | (c)/s | (c) CPU ms per delivery |"
echo "|---|---|---|---|---|---|---|"
while IFS=$'\t' read -r pair name idle b c; do
  bcpu=$(cut -d'|' -f5 <<<"$b" | sed 's/, loadtest [0-9.]*//; s/ (all .*//')
  btotal=$(awk -v s="$bcpu" 'BEGIN { n = split(s, a, ", "); t = 0; for (i = 1; i <= n; i++) if (a[i] !~ /\//) { split(a[i], f, " "); t += f[2] } printf "%.2f", t }')
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$pair" "$name" "$idle" "$(cut -d'|' -f3 <<<"$b" | tr -d ' ')" "$btotal" \
    "$(cut -d'|' -f3 <<<"$c" | tr -d ' ')" "$(cut -d'|' -f5 <<<"$c" | sed 's/^ *//; s/ *$//')"
done <"$results"
echo
echo "runs kept in $out"
