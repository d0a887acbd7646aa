#!/usr/bin/env bash
# The end-to-end benchmark behind `make bench-e2e` (issue 10): cmd/loadtest's suite (tiers,
# openloop, fanout and burst, then one table with every figure) on a throwaway stack, a Temporal
# dev server and webhookd on SQLite as run.sh runs them, on ports of their own so that it runs
# beside a `make run` (bench-stack.sh, shared with bench-isolation.sh). It prints the table at the
# end and stops everything on exit.
#
#   deployments/dev/bench-e2e.sh [suite|tiers|openloop|fanout|fanout-filter|burst|throughput] [loadtest flags, e.g. -events 500]
#   WEBHOOKD_BIN=/path/to/webhookd deployments/dev/bench-e2e.sh     # measure another build
#   WEBHOOKD_SWEEP_INTERVAL=1s deployments/dev/bench-e2e.sh         # WEBHOOKD_* reach webhookd
#   BENCH_TRACING=0.01 deployments/dev/bench-e2e.sh tiers           # webhookd traces 1% of events (1: all)
#
# Flags given here come after the script's own, so they win. The stack allows the fan-out's
# webhooks (WEBHOOKD_MAX_WEBHOOKS: -hooks plus 10, unless set) and does not rate-limit the API.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443). BENCH_KEEP=1 keeps the data and logs.
set -euo pipefail
scenario=suite
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  scenario=$1
  shift
fi
case $scenario in
  suite | tiers | openloop | fanout | fanout-filter | burst | throughput) ;;
  *) echo "usage: $0 [suite|tiers|openloop|fanout|fanout-filter|burst|throughput] [loadtest flags]" >&2; exit 2 ;;
esac

# The fan-out registers -hooks webhooks (loadtest's default: 1000) on one account.

# shellcheck source=deployments/dev/bench-stack.sh
source "$(dirname "$0")/bench-stack.sh"
hooks=$(hooks_flag 1000 "$@")

# bench-stack.sh exports TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, so the tiers scenario's bare
# Temporal tier runs on the stack's server; WEBHOOKD_RATE_LIMIT, WEBHOOKD_ALLOW_PRIVATE_TARGETS and
# WEBHOOKD_EXTRA_CA_FILE too.
export WEBHOOKD_MAX_WEBHOOKS=${WEBHOOKD_MAX_WEBHOOKS:-$((hooks + 10))}

echo "== $scenario: starting a fresh stack ($webhookd, $("$webhookd" version), tracing ${BENCH_TRACING:-off})"
start_stack "$work/$scenario"
rc=0
# The tiers report the CPU time per delivery of webhookd, the Temporal dev server (with what it
# runs under) and, given BENCH_POSTGRES_PID (the postmaster of BENCH_DATABASE_URL's server), PostgreSQL.
"$work/loadtest" -scenario "$scenario" -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c" \
  -listen "127.0.0.1:$healthy_port" -pid "${pids[1]}" -temporal-pid "${pids[0]}" ${BENCH_POSTGRES_PID:+-postgres-pid "$BENCH_POSTGRES_PID"} \
  -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" ${otlp_sink_flag[@]+"${otlp_sink_flag[@]}"} "$@" 2>&1 | tee "$work/$scenario.out" || rc=$?
stop_stack

echo
print_results "$scenario"
# Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
exit "$rc"
