#!/usr/bin/env bash
# The end-to-end benchmark behind `make bench-e2e` (issue 10): cmd/loadtest's suite (tiers,
# openloop, fanout and burst, then one table with every figure) on a throwaway stack, a Temporal
# dev server and webhookd on SQLite as run.sh runs them, on ports of their own so that it runs
# beside a `make run` (bench-stack.sh, shared with bench-isolation.sh). It prints the table at the
# end and stops everything on exit.
#
#   deployments/dev/bench-e2e.sh [suite|tiers|openloop|fanout|fanout-filter|burst|throughput|lanes|destinations] [loadtest flags, e.g. -events 500]
#   WEBHOOKD_BIN=/path/to/webhookd deployments/dev/bench-e2e.sh     # measure another build
#   WEBHOOKD_SWEEP_INTERVAL=1s deployments/dev/bench-e2e.sh         # WEBHOOKD_* reach webhookd
#   BENCH_TRACING=0.01 deployments/dev/bench-e2e.sh tiers           # webhookd traces 1% of events (1: all)
#
# lanes (issue 43; cmd/loadtest/lanes.go) is the chaos run of ordered lanes: when loadtest prints
# "lanes: kill webhookd", then "lanes: kill temporal", this script sends that process SIGKILL and
# starts it again BENCH_KILL_PAUSE seconds later (3) on the same data, and tells loadtest so (a
# file in its -kill-ack-dir). webhookd runs with WEBHOOKD_RETRY_SCHEDULE=1s,1s,2s,2s,5s,5s,5s,5s
# (the caller's wins): nine attempts, so that no head the receiver answers 503 at 5% runs out of
# them (once in 10^11) and blocks its lane, and the stuck key's head runs out of them within the
# phase. Scaled down:
#
#   deployments/dev/bench-e2e.sh lanes -events 2000 -keys 100
#
# destinations (issue 44; cmd/loadtest/destinations.go) is the destination tier: tier (c) to an
# HTTPS receiver beside the same publishing into NATS JetStream and RabbitMQ, -rounds rounds (3),
# deliveries/s and CPU per delivery, the brokers' own apart. This script starts the brokers
# (bench-brokers.sh: bin/nats-server with JetStream, a RabbitMQ node of its own; `make rabbitmq`
# installs RabbitMQ) and webhookd with WEBHOOKD_ALLOW_HTTP_TARGETS=true for their plaintext
# nats:// and amqp:// URLs (the caller's wins). It is not in the suite: it needs RabbitMQ installed
# and adds more than a minute (its nine tiers take 60-80 s). Scaled down:
#
#   deployments/dev/bench-e2e.sh destinations -events 500 -rounds 1
#
# Flags given here come after the script's own, so they win. The stack allows the fan-out's
# webhooks (WEBHOOKD_MAX_WEBHOOKS: -hooks plus 10, unless set) and does not rate-limit the API.
#
# Ports: BENCH_TEMPORAL_PORT (17233), BENCH_UI_PORT (18233), BENCH_HTTP_PORT (18080),
# BENCH_HEALTHY_PORT (19443); the destinations' brokers, bench-brokers.sh's BENCH_NATS_PORT (14222),
# BENCH_AMQP_PORT (15673), BENCH_AMQP_DIST_PORT (25673), BENCH_EPMD_PORT (14369). BENCH_KEEP=1 keeps
# the data and logs.
set -euo pipefail
scenario=suite
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  scenario=$1
  shift
fi
case $scenario in
  suite | tiers | openloop | fanout | fanout-filter | burst | throughput | lanes | destinations) ;;
  *) echo "usage: $0 [suite|tiers|openloop|fanout|fanout-filter|burst|throughput|lanes|destinations] [loadtest flags]" >&2; exit 2 ;;
esac

# The fan-out registers -hooks webhooks (loadtest's default: 1000) on one account.

# shellcheck source=deployments/dev/bench-stack.sh
source "$(dirname "$0")/bench-stack.sh"
hooks=$(hooks_flag 1000 "$@")
if [ "$scenario" = destinations ]; then
  # shellcheck source=deployments/dev/bench-brokers.sh
  source deployments/dev/bench-brokers.sh
fi

# bench-stack.sh exports TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, so the tiers scenario's bare
# Temporal tier runs on the stack's server; WEBHOOKD_RATE_LIMIT, WEBHOOKD_ALLOW_PRIVATE_TARGETS and
# WEBHOOKD_EXTRA_CA_FILE too.
export WEBHOOKD_MAX_WEBHOOKS=${WEBHOOKD_MAX_WEBHOOKS:-$((hooks + 10))}

stack_env=()
case $scenario in
  lanes) stack_env=("WEBHOOKD_RETRY_SCHEDULE=${WEBHOOKD_RETRY_SCHEDULE:-1s,1s,2s,2s,5s,5s,5s,5s}") ;;
  destinations) stack_env=("WEBHOOKD_ALLOW_HTTP_TARGETS=${WEBHOOKD_ALLOW_HTTP_TARGETS:-true}") ;;
esac
echo "== $scenario: starting a fresh stack ($webhookd, $("$webhookd" version), tracing ${BENCH_TRACING:-off}) ${stack_env[*]}"
dir=$work/$scenario
start_stack "$dir" ${stack_env[@]+"${stack_env[@]}"}
# The brokers start after the stack, whose processes are ${pids[0]} and ${pids[1]}.
broker_flags=()
if [ "$scenario" = destinations ]; then
  start_brokers "$dir"
  broker_flags=(-nats "$nats_url" -amqp "$amqp_url" -nats-pid "$nats_pid" -rabbitmq-pid "$rabbitmq_pid")
fi
rc=0
# The tiers report the CPU time per delivery of webhookd, the Temporal dev server (with what it
# runs under) and, given BENCH_POSTGRES_PID (the postmaster of BENCH_DATABASE_URL's server), PostgreSQL.
loadtest_cmd=("$work/loadtest" -scenario "$scenario" -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c"
  -listen "127.0.0.1:$healthy_port" -pid "${pids[1]}" -temporal-pid "${pids[0]}" ${BENCH_POSTGRES_PID:+-postgres-pid "$BENCH_POSTGRES_PID"}
  -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" ${otlp_sink_flag[@]+"${otlp_sink_flag[@]}"}
  ${broker_flags[@]+"${broker_flags[@]}"})
if [ "$scenario" != lanes ]; then
  "${loadtest_cmd[@]}" "$@" 2>&1 | tee "$work/$scenario.out" || rc=$?
else
  # The lanes scenario's kills: loadtest asks for each (its throughput phase, first, reads the CPU
  # time of the processes that started).
  out=$work/lanes.out
  acks=$work/lanes-acks
  mkdir -p "$acks"
  : >"$out"
  "${loadtest_cmd[@]}" -kill-ack-dir "$acks" "$@" >"$out" 2>&1 &
  loadtest=$!
  tail -n +1 -f --pid="$loadtest" "$out" &
  tailer=$!
  pids+=("$loadtest" "$tailer") # stopped with the stack if this script stops first
  pause=${BENCH_KILL_PAUSE:-3}
  for target in webhookd temporal; do
    until grep -q "^lanes: kill $target" "$out"; do
      kill -0 "$loadtest" 2>/dev/null || break 2
      sleep 0.1
    done
    if [ "$target" = webhookd ]; then
      echo "== kill -9 webhookd (pid ${pids[1]})"
      kill -KILL "${pids[1]}" || true
      wait "${pids[1]}" 2>/dev/null || true
      echo "---- killed with SIGKILL by bench-e2e.sh; restarted ${pause}s later ----" >>"$dir/webhookd.log"
      sleep "$pause"
      start_webhookd "$dir/webhookd.log" ${stack_env[@]+"${stack_env[@]}"}
      echo "== webhookd ready again (pid ${pids[1]})"
    else
      echo "== kill -9 the Temporal dev server (pid ${pids[0]})"
      kill -KILL "${pids[0]}" || true
      wait "${pids[0]}" 2>/dev/null || true
      echo "---- killed with SIGKILL by bench-e2e.sh; restarted ${pause}s later ----" >>"$dir/temporal.log"
      sleep "$pause"
      start_temporal "$dir"
      echo "== the Temporal dev server ready again (pid ${pids[0]})"
    fi
    touch "$acks/$target"
  done
  wait "$loadtest" || rc=$?
  wait "$tailer" || true
fi
stop_stack

echo
print_results "$scenario"
# Exit status 2 is a measurement whose wait ended first: its figures are lower bounds.
exit "$rc"
