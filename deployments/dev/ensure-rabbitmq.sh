#!/usr/bin/env bash
# Makes sure the RabbitMQ server is installed: the tests of activities/broker (and the system tests
# of the RabbitMQ destination) start their own broker from it, a process per test run on ports of
# its own (activities/broker/brokertest/rabbitmq.go). The Debian package's service is not used.
set -euo pipefail

if [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
RabbitMQ is missing at /usr/lib/rabbitmq/bin/rabbitmq-server; the broker tests need it.
Install it, then rerun:
  Debian:    sudo apt-get install rabbitmq-server
  Elsewhere: install RabbitMQ 3.10 or later, and link /usr/lib/rabbitmq/bin to its sbin directory
MSG
  exit 1
fi

echo "installing RabbitMQ (Debian's rabbitmq-server package)"
apt-get update -qq
# policy-rc.d: the package's own service is not started; the tests start brokers of their own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  made_policy=1
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server >/dev/null
if [ "$made_policy" = 1 ]; then
  rm -f "$policy"
fi
