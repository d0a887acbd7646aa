#!/usr/bin/env bash
# The at-least-once check behind `make bench-kill` (docs/performance-history.md, "kill -9 under
# load"). On a throwaway stack as bench-isolation.sh's (a Temporal dev server, and webhookd on
# SQLite in a temporary directory or on BENCH_DATABASE_URL), cmd/loadtest -scenario killload
# publishes from two accounts, open loop, for 25 s, to six webhooks on one receiver host; meanwhile
# this script sends SIGKILL to webhookd 8 s after the publishing began and starts it again 3 s
# later, on the same database and ports. loadtest then waits for every accepted event's deliveries
# (5 minutes at most), prints what is missing, what arrived twice, what arrived although its publish
# got no 202 and the failed publishes, and exits 1 if an accepted event's delivery is missing.
#
#   deployments/dev/bench-kill.sh [loadtest flags, e.g. -rate 6 -duration 40s]
#   BENCH_KILL_AT=15 BENCH_KILL_PAUSE=10 deployments/dev/bench-kill.sh   # kill later, stay down longer
#   BENCH_DATABASE_URL=postgres://... WEBHOOKD_SECRET_KEY=... deployments/dev/bench-kill.sh
#   BENCH_KILL_TARGET=postgres deployments/dev/bench-kill.sh   # kill -9 PostgreSQL's postmaster instead
#
# BENCH_KILL_TARGET=postgres (issue 33) runs webhookd on the stack's own PostgreSQL (BENCH_POSTGRES=1,
# synchronous_commit on, as production) and kills the postmaster instead of webhookd, then starts it
# again on the same data: every event answered 202 must still be delivered.
#
# BENCH_KILL_AT and BENCH_KILL_PAUSE are in seconds (8 and 3), the first from loadtest's
# "killload: publishing" line. webhookd runs with WEBHOOKD_RETRY_SCHEDULE=1s,2s,5s, so that the
# retries of the endpoints that answer 503 come within the run, and WEBHOOKD_HOST_CONCURRENCY=4, so
# that attempts queue for the shared receiver host when the kill comes (with each account's
# rate-limited webhook, below the publish rate, and the per-endpoint cap); the caller's values win.
# The endpoints that answer 503 to each delivery's first request narrow their window (5xx never
# trip a breaker), so their retries succeed within the short schedule.
# loadtest's flags given here come after the script's own, so they win.
#
# Ports: as bench-isolation.sh's; the receiver listens on BENCH_HEALTHY_PORT (19443). BENCH_KEEP=1
# keeps the data and logs; a run with a missing delivery keeps them anyway.
set -euo pipefail
kill_at=${BENCH_KILL_AT:-8}
pause=${BENCH_KILL_PAUSE:-3}
target=${BENCH_KILL_TARGET:-webhookd}
case $target in
  webhookd) ;;
  postgres) export BENCH_POSTGRES=1 ;;
  *) echo "BENCH_KILL_TARGET=$target: want webhookd or postgres" >&2; exit 2 ;;
esac

# shellcheck source=deployments/dev/bench-stack.sh
source "$(dirname "$0")/bench-stack.sh"

stack_env=("WEBHOOKD_RETRY_SCHEDULE=${WEBHOOKD_RETRY_SCHEDULE:-1s,2s,5s}"
  "WEBHOOKD_HOST_CONCURRENCY=${WEBHOOKD_HOST_CONCURRENCY:-4}")
dir=$work/killload
out=$work/killload.out
database=SQLite
[ -z "${BENCH_DATABASE_URL:-}" ] || database=PostgreSQL # not the URL: it may carry a password
echo "== killload: starting a fresh stack ($webhookd, $("$webhookd" version)) on $database, ${stack_env[*]}; the kill: $target"
start_stack "$dir" "${stack_env[@]}"

: >"$out" # for tail, which may come first
"$work/loadtest" -scenario killload -api "http://$WEBHOOKD_HTTP_ADDR" -key "$key_c" -noisy-key "$key_b" \
  -listen "127.0.0.1:$healthy_port" -cert "$work/loadtest-cert.pem" -cert-key "$work/loadtest-key.pem" \
  -rate 4 -duration 25s "$@" >"$out" 2>&1 &
loadtest=$!
tail -n +1 -f --pid="$loadtest" "$out" &
tailer=$!
pids+=("$loadtest" "$tailer") # stopped with the stack if this script stops first

# The kill is timed from the first publish, not from loadtest's start: registering the webhooks
# takes a varying while.
until grep -q '^killload: publishing' "$out" 2>/dev/null; do
  kill -0 "$loadtest" 2>/dev/null || break
  sleep 0.1
done

status=0
if grep -q '^killload: publishing' "$out" 2>/dev/null; then
  sleep "$kill_at"
  if ! kill -0 "$loadtest" 2>/dev/null; then
    echo "== loadtest ended before the kill: nothing was measured (set BENCH_KILL_AT below -duration)" >&2
    status=1
  elif [ "$target" = postgres ]; then
    echo "== +${kill_at}s: kill -9 PostgreSQL's postmaster (pid $pg_pid)"
    kill -KILL "$pg_pid" || true
    wait "$pg_pid" 2>/dev/null || true
    echo "---- postmaster killed with SIGKILL by bench-kill.sh; restarted ${pause}s later ----" >>"$work/postgres.log"
    sleep "$pause"
    echo "== +${kill_at}s+${pause}s: starting PostgreSQL again on the same data"
    start_postgres
    echo "== PostgreSQL ready again (pid $pg_pid)"
  else
    echo "== +${kill_at}s: kill -9 webhookd (pid ${pids[1]})"
    kill -KILL "${pids[1]}" || true # already gone: the status below says how
    rc=0
    wait "${pids[1]}" || rc=$?
    if [ "$rc" != 137 ]; then
      echo "== webhookd exited with status $rc, not by the SIGKILL (see $dir/webhookd.log)" >&2
      status=1
    fi
    echo "---- killed with SIGKILL by bench-kill.sh; restarted ${pause}s later ----" >>"$dir/webhookd.log"
    sleep "$pause"
    echo "== +${kill_at}s+${pause}s: starting webhookd again"
    start_webhookd "$dir/webhookd.log" "${stack_env[@]}"
    echo "== webhookd ready again (pid ${pids[1]})"
  fi
fi

rc=0
wait "$loadtest" || rc=$?
wait "$tailer" || true
stop_stack
[ "$rc" = 0 ] || status=1
if [ "$status" != 0 ]; then
  BENCH_KEEP=1 # the cleanup on exit keeps $work for the logs
fi
echo
print_results killload
exit "$status"
