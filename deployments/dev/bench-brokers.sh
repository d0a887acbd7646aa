#!/usr/bin/env bash
# shellcheck shell=bash
# The brokers of bench-e2e.sh's destinations scenario (issue 44), sourced by it after
# bench-stack.sh: a nats-server with JetStream (bin/nats-server, built by `make bin/nats-server`)
# and a RabbitMQ node of its own (Debian's rabbitmq-server, installed by `make rabbitmq`), each on
# ports of its own, as the tests' brokers (activities/broker/brokertest) run: the node has its own
# name, distribution port, epmd and data, so that it runs beside the package's service and beside
# the tests' nodes. The script starts them, not loadtest: loadtest reports its own CPU time with its
# descendants', and the brokers' must be apart. loadtest creates the stream, and declares the
# exchange and queue, as their owner would. RabbitMQ's default user, guest, connects from
# loopback only, which is where everything here runs.
#
# start_brokers DIR starts both with their data in DIR and waits until they take connections;
# their pids go into pids (so stop_stack stops them) and nats_pid and rabbitmq_pid, their URLs
# into nats_url and amqp_url (with guest's password: webhookd seals it).
#
# Ports: BENCH_NATS_PORT (14222), BENCH_AMQP_PORT (15673), BENCH_AMQP_DIST_PORT (25673),
# BENCH_EPMD_PORT (14369).

nats_port=${BENCH_NATS_PORT:-14222}
amqp_port=${BENCH_AMQP_PORT:-15673}
amqp_dist_port=${BENCH_AMQP_DIST_PORT:-25673}
epmd_port=${BENCH_EPMD_PORT:-14369}
rabbitmq_server=/usr/lib/rabbitmq/bin/rabbitmq-server

for port in "$nats_port" "$amqp_port" "$amqp_dist_port" "$epmd_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port on 127.0.0.1 is already in use (another benchmark?); set the BENCH_NATS_PORT, BENCH_AMQP_PORT, BENCH_AMQP_DIST_PORT and BENCH_EPMD_PORT variables" >&2
    exit 1
  fi
done
[ -x bin/nats-server ] || make bin/nats-server
[ -x "$rabbitmq_server" ] || make rabbitmq

# shellcheck disable=SC2034 # nats_pid, rabbitmq_pid, nats_url and amqp_url are the caller's
start_brokers() {
  local dir=$1
  mkdir -p "$dir/nats" "$dir/rabbitmq"
  bin/nats-server -a 127.0.0.1 -p "$nats_port" -js -sd "$dir/nats/store" >"$dir/nats/nats.log" 2>&1 &
  nats_pid=$!
  pids+=("$nats_pid")
  nats_url=nats://127.0.0.1:$nats_port

  # epmd in the foreground, a child of this script: the node's own would daemonize and outlive it.
  epmd -port "$epmd_port" >"$dir/rabbitmq/epmd.log" 2>&1 &
  pids+=("$!")
  local r=$dir/rabbitmq
  printf 'listeners.tcp.default = 127.0.0.1:%s\nlog.file.level = warning\nlog.console = false\n' "$amqp_port" >"$r/rabbitmq.conf"
  : >"$r/rabbitmq-env.conf"
  echo '[].' >"$r/enabled_plugins"
  echo '[].' >"$r/advanced.config"
  # RABBITMQ_ALLOW_INPUT and -noinput: the script execs erl, which execs the Erlang VM, so $! is
  # the VM itself (its CPU time is the broker's) and SIGTERM stops it.
  env HOME="$r" RABBITMQ_NODENAME="webhookd-bench-$amqp_port@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$amqp_port" RABBITMQ_DIST_PORT="$amqp_dist_port" ERL_EPMD_PORT="$epmd_port" \
    RABBITMQ_MNESIA_BASE="$r/mnesia" RABBITMQ_LOG_BASE="$r/log" RABBITMQ_CONFIG_FILE="$r/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$r/advanced.config" RABBITMQ_CONF_ENV_FILE="$r/rabbitmq-env.conf" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$r/enabled_plugins" RABBITMQ_PID_FILE="$r/rabbitmq.pid" \
    RABBITMQ_ALLOW_INPUT=true RABBITMQ_SERVER_START_ARGS=-noinput \
    "$rabbitmq_server" >"$r/server.log" 2>&1 &
  rabbitmq_pid=$!
  pids+=("$rabbitmq_pid")
  amqp_url=amqp://guest:guest@127.0.0.1:$amqp_port

  wait_for nats_listening "$nats_pid" nats-server "$dir/nats/nats.log"
  wait_for amqp_listening "$rabbitmq_pid" "the RabbitMQ node" "$r/server.log"
  local version
  version=$(basename "$(dirname "$(dirname "$(readlink -f "$rabbitmq_server")")")")
  echo "== brokers: nats-server $(bin/nats-server --version | awk '{print $2}') (pid $nats_pid) at $nats_url, RabbitMQ ${version#rabbitmq_server-} (pid $rabbitmq_pid) at 127.0.0.1:$amqp_port"
}

nats_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null; }

# The node opens its AMQP listener once it has booted.
amqp_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$amqp_port") 2>/dev/null; }
