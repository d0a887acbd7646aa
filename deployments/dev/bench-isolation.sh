#!/usr/bin/env bash
# The receiver isolation benchmark behind `make bench-isolation` (docs/performance-history.md,
# issues 7 and 17). For each scenario of cmd/loadtest it starts a throwaway stack, a Temporal dev
# server and webhookd on SQLite as run.sh does, on ports of its own so that it runs beside a `make
# run`, with two accounts: B, whose webhooks hang, and C, whose webhook is healthy. It prints the
# results and stops everything on exit.
#
#   deployments/dev/bench-isolation.sh [all|hanging|isolation|sharedhost|matrix|ratelimit|throughput] [loadtest flags, e.g. -rate 5]
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
# sharedhost (issue 17) puts B's hanging webhooks and C's healthy one on one receiver, one host and
# port (BENCH_HEALTHY_PORT), and waits 150 s at most for C's deliveries in each phase: a build whose
# guards are keyed by host alone may not deliver them for minutes. It waits 12 s after B publishes
# for a breaker to open: with a WEBHOOKD_DELIVERY_TIMEOUT over 5s, pass -pause (twice it or more).
# `all` leaves it out (hanging and isolation, as before): against such a build it adds minutes.
# It gets webhookd's and the Temporal server's pids, so it reports the CPU of B's held backlog
# (issue 27); -pressure 3 adds C's probes beside three busy processes.
#
# matrix (issue 40) is the noisy-neighbour matrix: for each heavy thing account B can do (endpoints
# that hang, refuse B's TLS or fail its OAuth2 token on C's receiver host and port; big events past
# heavy filters; concurrent filter trials; a burst of 2,000 publishes; portal pages and long lists
# over 10,000 events; a recover of their 10,000 held deliveries; a replay of another 10,000, waited
# for to its end), C's publish-to-receipt and API answer times (POST /events, GET /webhooks), first
# with B idle, then during B's load, in one run. It prints one table, a row each: idle and during
# p50 / max, their ratios, C's failed attempts, webhookd's peak RSS idle and over B's load, and
# what B did. Each row has fresh webhooks on the same two accounts; between rows it waits
# until webhookd and the Temporal dev server are quiet (their pids are passed; 8 minutes at most).
# The stack has a 5 s delivery timeout (the default, set here so that the table says what it
# measured) and WEBHOOKD_MAX_WEBHOOKS=200, so that B's 100-webhook rows fit beside the webhook of
# its data set. -matrix-rows picks rows, the -matrix-* flags set their scale
# (docs/performance-history.md, "Noisy neighbours"); C waits 90 s at most for a delivery (-timeout).
# Left out of `all`: it runs about 20 minutes (2 shared cores).
#
# ratelimit (issue 27) measures a webhook's own rateLimit with a backlog: for each of -rates
# (1,2,5,50), a fresh webhook of account C and -events (40) events published at once, the rates one
# after another; it prints the rate the receiver saw. Also left out of `all`.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443), BENCH_HANGING_PORT (19444). BENCH_KEEP=1 keeps the data and logs.
set -euo pipefail
scenario=all
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  scenario=$1
  shift
fi
case $scenario in
  all) scenarios=(hanging isolation) ;;
  hanging | isolation | sharedhost | matrix | ratelimit | throughput) scenarios=("$scenario") ;;
  *) echo "usage: $0 [all|hanging|isolation|sharedhost|matrix|ratelimit|throughput] [loadtest flags]" >&2; exit 2 ;;
esac

# shellcheck source=deployments/dev/bench-stack.sh
source "$(dirname "$0")/bench-stack.sh"

status=0
for s in "${scenarios[@]}"; do
  stack_env=() args=()
  case $s in
    isolation)
      stack_env=("WEBHOOKD_MAX_CONCURRENT_DELIVERIES=${WEBHOOKD_MAX_CONCURRENT_DELIVERIES:-20}")
      args=(-rate 2 -noisy-hooks 5 -duration 60s)
      ;;
    sharedhost) args=(-timeout 150s) ;;
    matrix)
      stack_env=("WEBHOOKD_DELIVERY_TIMEOUT=${WEBHOOKD_DELIVERY_TIMEOUT:-5s}" "WEBHOOKD_MAX_WEBHOOKS=${WEBHOOKD_MAX_WEBHOOKS:-200}")
      args=(-timeout 90s)
      ;;
  esac
  echo "== $s: starting a fresh stack ($webhookd, $("$webhookd" version)) ${stack_env[*]}"
  start_stack "$work/$s" "${stack_env[@]}"
  # pids[0] is the Temporal dev server (temporal-dev.sh execs it), pids[1] webhookd, as bench-e2e.sh
  # passes them for the tiers.
  if [ "$s" = sharedhost ] || [ "$s" = matrix ]; then
    args+=(-pid "${pids[1]}" -temporal-pid "${pids[0]}")
  fi
  rc=0
  "$work/loadtest" -scenario "$s" -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c" -noisy-key "$key_b" \
    -listen "127.0.0.1:$healthy_port" -hang-listen "127.0.0.1:$hanging_port" \
    -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" "${args[@]}" "$@" 2>&1 | tee "$work/$s.out" || rc=$?
  stop_stack
  # Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
  case $rc in 0 | 2) ;; *) status=1 ;; esac
  echo
done

print_results "${scenarios[@]}"
exit "$status"
