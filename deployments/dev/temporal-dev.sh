#!/usr/bin/env bash
# The Temporal dev server as webhookd's scripts run it (run.sh, bench-isolation.sh): SQLite in WAL
# mode, fairness across accounts on (docs/operations.md), and webhookd's search attributes. One
# place for these flags, so no script starts a server without one of them. It execs the server,
# so the caller's $! is the server's pid.
#
#   deployments/dev/temporal-dev.sh <port> <ui port> <database file> [more start-dev flags]
set -euo pipefail
port=$1 ui_port=$2 db=$3
shift 3
exec "$(dirname "$0")/../../bin/temporal" server start-dev \
  --ip 127.0.0.1 --port "$port" --ui-port "$ui_port" --db-filename "$db" --log-level warn \
  --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal \
  --dynamic-config-value matching.enableFairness=true \
  --search-attribute WebhookId=Int --search-attribute EventType=Keyword \
  --search-attribute Variant=Keyword --search-attribute DeliveryState=Keyword \
  "$@"
