#!/usr/bin/env bash
# The Temporal dev server as webhookd's scripts run it (run.sh, bench-isolation.sh): SQLite in WAL
# mode, the dynamic config of dynamicconfig.txt (fairness across accounts, docs/operations.md),
# webhookd's search attributes, a garbage collector tuned for it (GOGC) and a slower read of its
# visibility queue. One place for these flags, so no script starts a server without one of them. It
# execs the server, so the caller's $! is the server's pid.
#
# Once the server answers, its caller trims its visibility table (`bin/devtemporal trim-visibility
# <database file>`, cmd/devtemporal): the indexes that neither the Web UI's list nor a search
# attribute uses cost about 40% of the dev server's CPU per delivery. A child of the server would
# outlive its reaping in a container, so the caller runs it.
#
#   deployments/dev/temporal-dev.sh <webhookd> <port> <ui port> <database file> [more start-dev flags]
#
# <webhookd> is the binary whose search attributes to register: `webhookd search-attributes` lists
# them, from their one definition in the code.
set -euo pipefail
webhookd=$1 port=$2 ui_port=$3 db=$4
shift 4
attributes=()
while read -r name type; do
  attributes+=(--search-attribute "$name=$type")
done < <("$webhookd" search-attributes)
if [ ${#attributes[@]} -eq 0 ]; then
  echo "$webhookd search-attributes listed nothing" >&2
  exit 1
fi
# The same reading as internal/temporaltest's: blank lines and # comments skipped, KEY=VALUE else.
dynamic=()
while read -r line; do
  case $line in
    '' | '#'*) ;;
    *) dynamic+=(--dynamic-config-value "$line") ;;
  esac
done <"$(dirname "$0")/dynamicconfig.txt"
if [ ${#dynamic[@]} -eq 0 ]; then
  echo "$(dirname "$0")/dynamicconfig.txt set nothing" >&2
  exit 1
fi
# GOGC=400: garbage collection was 16% of the dev server's CPU per delivery; collecting a quarter
# as often cut it by about 0.6 ms per delivery (0.4 at GOGC=200), for more memory under load: a
# peak RSS of 770 MB over the 3-round tiers benchmark (about 7,000 workflows), 520-570 MB at
# GOGC=200 (docs/performance-history.md, "Cutting the cost"). A lightly used dev server stays small.
# history.visibilityProcessorMaxPollRPS=5 and history.visibilityTaskBatchSize=1000: the visibility
# queue reads new tasks at most 5 times a second (Temporal's default is 20), up to 1,000 a read
# (100), so each read takes a fifth of a second's tasks and it keeps up with 2,500 deliveries a
# second. A workflow closed by then gets only its close record. That cut the dev server's CPU per
# delivery in tier (c) by 0.4-0.8 ms (PostgreSQL, two pairs) and 0.5 ms (SQLite); the first setting
# on make cluster's server changed nothing, so these are the dev server's alone, not in
# dynamicconfig.txt (docs/performance-history.md, "The dev server's visibility reads"). The Web UI's
# list and searches lag up to 0.2 s more; a delivery that closes within that time is listed only as
# completed.
exec env GOGC=400 "$(dirname "$0")/../../bin/temporal" server start-dev \
  --ip 127.0.0.1 --port "$port" --ui-port "$ui_port" --db-filename "$db" --log-level warn \
  --sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=normal \
  --dynamic-config-value history.visibilityProcessorMaxPollRPS=5 \
  --dynamic-config-value history.visibilityTaskBatchSize=1000 \
  "${dynamic[@]}" "${attributes[@]}" "$@"
