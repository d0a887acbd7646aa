#!/usr/bin/env bash
# Issue 10's scale figures behind `make bench-scale`: cmd/loadtest's list and pending scenarios,
# each on a fresh throwaway stack (bench-stack.sh: a Temporal dev server and webhookd on SQLite, on
# ports of their own). It prints each scenario's figures at the end and stops everything on exit.
#
#   - list: -hooks webhooks (10000 here) on one account, then the webhooks list's p50/p99/max for
#     the first page, a middle page and the last full page. The stack allows them
#     (WEBHOOKD_MAX_WEBHOOKS: -hooks plus 10, unless set).
#   - pending: -events events (loadtest's default: 100000) to a receiver that answers 500, so that
#     every delivery fails once and then waits on a long retry timer (WEBHOOKD_RETRY_SCHEDULE=24h
#     unless set); webhookd's RSS over the run and the list's latency before, during and after.
#     With curl, webhookd's heap profile is saved at the end (BENCH_DEBUG_PORT, 19445).
#
#   deployments/dev/bench-scale.sh [all|list|pending] [loadtest flags, e.g. -events 20000]
#   WEBHOOKD_BIN=/path/to/webhookd deployments/dev/bench-scale.sh     # measure another build
#
# 100000 events take about half an hour on a 2 vCPU VM (the dev server's ~60 events/s). Flags given
# here come after the script's own, so they win; they reach both scenarios.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443), BENCH_DEBUG_PORT (19445). BENCH_KEEP=1 keeps the data and logs (the
# heap profile too).
set -euo pipefail
scenario=all
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  scenario=$1
  shift
fi
case $scenario in
  all) scenarios=(list pending) ;;
  list | pending) scenarios=("$scenario") ;;
  *) echo "usage: $0 [all|list|pending] [loadtest flags]" >&2; exit 2 ;;
esac

debug_port=${BENCH_DEBUG_PORT:-19445}
if (exec 3<>"/dev/tcp/127.0.0.1/$debug_port") 2>/dev/null; then
  echo "port $debug_port on 127.0.0.1 is already in use (another benchmark?); set BENCH_DEBUG_PORT" >&2
  exit 1
fi

# shellcheck source=deployments/dev/bench-stack.sh
source "$(dirname "$0")/bench-stack.sh"
hooks=$(hooks_flag 10000 "$@")

status=0
for s in "${scenarios[@]}"; do
  stack_env=() flags=()
  case $s in
    list)
      stack_env=("WEBHOOKD_MAX_WEBHOOKS=${WEBHOOKD_MAX_WEBHOOKS:-$((hooks + 10))}")
      flags=(-hooks "$hooks")
      ;;
    pending)
      stack_env=("WEBHOOKD_RETRY_SCHEDULE=${WEBHOOKD_RETRY_SCHEDULE:-24h}" "WEBHOOKD_DEBUG_ADDR=127.0.0.1:$debug_port")
      ;;
  esac
  echo "== $s: starting a fresh stack ($webhookd, $("$webhookd" version)) ${stack_env[*]}"
  start_stack "$work/$s" "${stack_env[@]}"
  rc=0
  # pids[1] is webhookd (start_stack): API and worker in one process, whose RSS pending samples.
  "$work/loadtest" -scenario "$s" -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c" -pid "${pids[1]}" \
    -listen "127.0.0.1:$healthy_port" \
    -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" "${flags[@]}" "$@" 2>&1 | tee "$work/$s.out" || rc=$?
  if [ "$s" = pending ] && command -v curl >/dev/null; then
    if curl -sf "http://127.0.0.1:$debug_port/debug/pprof/heap" -o "$work/pending-heap.pb.gz"; then
      echo "heap profile: $work/pending-heap.pb.gz (go tool pprof -top $webhookd $work/pending-heap.pb.gz)"
    fi
    curl -sf "http://127.0.0.1:$debug_port/debug/pprof/heap?debug=1" |
      grep -E '^# (HeapAlloc|HeapInuse|HeapSys|Sys|NumGC|StackInuse) ' || true
  fi
  stop_stack
  # Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
  case $rc in 0 | 2) ;; *) status=1 ;; esac
  echo
done

print_results "${scenarios[@]}"
exit "$status"
