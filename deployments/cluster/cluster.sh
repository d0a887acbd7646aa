#!/usr/bin/env bash
# The production-shaped local stack behind `make cluster`: PostgreSQL, a Temporal server with 4
# history shards on it (mutual TLS at the frontend), the Temporal Web UI, and webhookd as two API and
# two worker replicas (or two replicas of both roles, CLUSTER_ROLES=all). Each process runs under a supervisor loop that restarts it a second after it
# dies, as Kubernetes or systemd would. Ctrl-C stops it all. `make run` is the quick stack; this one
# is for trying what only a real deployment shows (replicas, restarts, TLS, a real database).
#
# Environment:
#   CLUSTER_DIR          state: database, certificates, logs, pids (default .cluster at the repo root)
#   CLUSTER_PORT_BASE    first of the ports below (default 17200)
#   TEMPORAL_NAMESPACE   namespace to create and use (default default)
#   WEBHOOKD_BIN, TEMPORAL_SERVER_BIN, TEMPORAL_SQL_TOOL_BIN, TEMPORAL_UI_BIN, TEMPORAL_CLI
#                        the programs to run (default bin/webhookd, bin/temporal-server, ...)
#   WEBHOOKD_*           passed to every webhookd replica (e.g. WEBHOOKD_ALLOW_PRIVATE_TARGETS)
#   CLUSTER_HISTORY_SHARDS  the Temporal server's history shards (4), for a new CLUSTER_DIR only:
#                        the count is fixed when Temporal's database is created
#   CLUSTER_TEMPORAL_GOGC, CLUSTER_TEMPORAL_GOMEMLIMIT  the Temporal server's GOGC and GOMEMLIMIT
#                        (the Go defaults unless set)
#   CLUSTER_DYNAMIC_CONFIG_EXTRA  a YAML file of dynamic config keys added to dynamicconfig.yaml's;
#                        a key in both takes the extra file's value
#   CLUSTER_PG_STATEMENTS  1: PostgreSQL loads pg_stat_statements (the extension is created in
#                        the database postgres), so that benchmarks can tell which statements,
#                        Temporal's or webhookd's, cost what (make bench-cluster; issue 45)
#   CLUSTER_ROLES        split (default): api-1 and api-2 (--role api), worker-1 and worker-2
#                        (--role worker); all: all-1 and all-2 (--role all, API and worker in one
#                        process, on the API ports), whose starts can be eager
#                        (docs/performance-history.md)
#
# Ports, on 127.0.0.1, as offsets from CLUSTER_PORT_BASE:
#   +0       PostgreSQL
#   +1 +2    Temporal frontend gRPC and HTTP (mutual TLS)   +3  frontend membership
#   +4 +5    Temporal history gRPC, membership
#   +6 +7    Temporal matching gRPC, membership
#   +8 +9    Temporal worker gRPC, membership
#   +10      Temporal server metrics (Prometheus)
#   +11      Temporal Web UI
#   +20 +21  webhookd api-1, api-2 (API, /readyz, /metrics); all-1, all-2 with CLUSTER_ROLES=all
#   +30 +31  webhookd worker-1, worker-2 (/healthz, /metrics); unused with CLUSTER_ROLES=all
#
# Once everything is ready, $CLUSTER_DIR/cluster.env lists the addresses, credentials, certificate
# paths and the replicas' names (API_REPLICAS, WORKER_REPLICAS: the workers alone, none with
# CLUSTER_ROLES=all) in KEY=VALUE lines for tests and tools; it is removed when the cluster stops.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# Paths given by the caller are relative to the caller's directory, so resolve them before cd.
webhookd=$(realpath "${WEBHOOKD_BIN:-$repo/bin/webhookd}")
temporal_server=$(realpath "${TEMPORAL_SERVER_BIN:-$repo/bin/temporal-server}")
sql_tool=$(realpath "${TEMPORAL_SQL_TOOL_BIN:-$repo/bin/temporal-sql-tool}")
temporal_ui=$(realpath "${TEMPORAL_UI_BIN:-$repo/bin/temporal-ui}")
temporal=$(realpath "${TEMPORAL_CLI:-$repo/bin/temporal}")
# webhookd refuses unknown WEBHOOKD_ variables.
unset WEBHOOKD_BIN
state=${CLUSTER_DIR:-$repo/.cluster}
mkdir -p "$state"
state=$(realpath "$state")
# The state dir keeps itself out of git, wherever it is.
echo '*' >"$state/.gitignore"
cd "$repo"

base=${CLUSTER_PORT_BASE:-17200}
namespace=${TEMPORAL_NAMESPACE:-default}
retention=72h
# How long a process gets between SIGTERM and SIGKILL when the cluster stops.
stop_timeout=30

pg_port=$base
frontend_port=$((base + 1))
ui_port=$((base + 11))
api_ports=($((base + 20)) $((base + 21)))
worker_ports=($((base + 30)) $((base + 31)))
# The replicas by what they serve: the API's (on api_ports, of role api_role) and the workers' alone
# (on worker_ports).
roles=${CLUSTER_ROLES:-split}
case $roles in
  split) api_role=api api_names=(api-1 api-2) worker_names=(worker-1 worker-2) ;;
  all) api_role=all api_names=(all-1 all-2) worker_names=() ;;
  *) echo "CLUSTER_ROLES=$roles: split or all" >&2; exit 1 ;;
esac

logs=$state/logs pids=$state/pids tls=$state/tls pgdir=$state/postgres
mkdir -p "$logs" "$pids"

for program in "$webhookd" "$temporal_server" "$sql_tool" "$temporal_ui" "$temporal"; do
  if [ ! -x "$program" ]; then
    echo "$program is missing: run make cluster, which builds it" >&2
    exit 1
  fi
done

# The newest PostgreSQL server binaries, found as model/dbtest finds them.
pg_bin=
if initdb=$(command -v initdb); then
  pg_bin=$(dirname "$(realpath "$initdb")")
fi
if [ ! -x "$pg_bin/postgres" ]; then
  pg_bin=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
if [ ! -x "$pg_bin/initdb" ]; then
  echo "no PostgreSQL server binaries (initdb, postgres): run make postgres" >&2
  exit 1
fi

# Temporal's cluster_membership table keeps ports in a smallint.
if ((base < 1024 || base + 31 > 32767)); then
  echo "CLUSTER_PORT_BASE=$base: the ports run from it to +31 and must stay within 1024-32767 (Temporal stores its ports as a smallint)" >&2
  exit 1
fi
for port in $(seq "$base" $((base + 11))) "${api_ports[@]}" "${worker_ports[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port on 127.0.0.1 is already in use; stop what holds it (another make cluster? see $pids) or set CLUSTER_PORT_BASE" >&2
    exit 1
  fi
done
# Left by a run that was killed, or that stopped: only the processes started below are current.
rm -f "$state/cluster.env" "$pids"/*.pid

# --- supervision -----------------------------------------------------------------------------

supervisors=() # pids of the supervisor loops, in start order
supervisor_names=()

# supervise <name> <command...> runs the command in a session of its own (so a Ctrl-C on the
# terminal reaches only this script, which stops things in order), logging to logs/<name>.log and
# writing its pid to pids/<name>.pid, and restarts it a second after it exits. A TERM to the loop
# stops it for good: TERM to the command, then, after $stop_timeout seconds, KILL to its process group.
supervise() {
  local name=$1
  shift
  (
    # The trap only takes note, so a TERM at any moment (even between starting the command and
    # recording its pid) ends in the same orderly stop below.
    stopping=
    trap 'stopping=1' TERM
    while [ -z "$stopping" ]; do
      # setsid execs the command (this child leads no group yet), so $! is the program's own pid.
      setsid "$@" </dev/null &
      child=$!
      echo "$child" >"$pids/$name.pid"
      # Polling rather than waiting on the child alone also notices when this script was killed
      # without a chance to clean up.
      while [ -z "$stopping" ] && kill -0 "$child" 2>/dev/null; do
        kill -0 $$ 2>/dev/null || stopping=1
        sleep 1 &
        wait $! || true
      done
      [ -z "$stopping" ] || break
      status=0
      wait "$child" || status=$?
      # Whatever it left behind (postgres backends, for one) goes with it, as with systemd.
      kill -KILL -- "-$child" 2>/dev/null || true
      echo "cluster.sh: $(date -u +%FT%TZ) $name exited with status $status; restarting it in 1s"
      sleep 1 &
      wait $! || true
    done
    kill -TERM "$child" 2>/dev/null || true
    for _ in $(seq $((stop_timeout * 5))); do
      kill -0 "$child" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$child" 2>/dev/null; then
      echo "cluster.sh: $name did not stop within ${stop_timeout}s; killing it"
    fi
    kill -KILL -- "-$child" 2>/dev/null || true
  ) >>"$logs/$name.log" 2>&1 &
  supervisors+=($!)
  supervisor_names+=("$name")
}

# stop_supervised <name...> stops these processes together and waits until they are gone.
stop_supervised() {
  local i selected=()
  for i in "${!supervisors[@]}"; do
    if [[ " $* " == *" ${supervisor_names[i]} "* ]]; then
      selected+=("${supervisors[i]}")
      kill -TERM "${supervisors[i]}" 2>/dev/null || true
    fi
  done
  for i in "${selected[@]}"; do
    wait "$i" 2>/dev/null || true
  done
}

cleanup() {
  trap - EXIT INT TERM
  # Stop everything even if one step fails.
  set +e
  rm -f "$state/cluster.env"
  if [ ${#supervisors[@]} -gt 0 ]; then
    echo
    echo "stopping..."
    # Clients first, the database last, so each one shuts down with what it depends on still up.
    stop_supervised api-1 api-2 worker-1 worker-2 all-1 all-2
    stop_supervised temporal-ui
    stop_supervised temporal-server
    stop_supervised postgres
  fi
}
# Ctrl-C or a TERM exits at once (through cleanup); a failed start exits through it too.
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_until <seconds> <what> <log name> <command...> runs the command every half second until it
# succeeds; after <seconds> it shows the end of the log and gives up.
wait_until() {
  local seconds=$1 what=$2 log=$logs/$3.log
  shift 3
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "$what: not ready after ${seconds}s; the end of $log:" >&2
      tail -n 30 "$log" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

# http_ok <port> <path> is true when GET http://127.0.0.1:<port><path> answers 200. It uses bash's
# /dev/tcp, as run.sh does, so the stack needs nothing but Go installed.
http_ok() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1" &&
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3 &&
    head -n 1 <&3 | grep -q ' 200 ') 2>/dev/null
}

# --- secrets: certificates and the webhookd secret key, made once per state dir -----------------

# A CA, a frontend certificate for localhost and 127.0.0.1, and one client certificate that
# webhookd, the CLI, the Web UI and the server's own worker present.
if [ ! -f "$tls/client.pem" ]; then
  echo "creating a CA and certificates in $tls"
  rm -rf "$tls.tmp"
  mkdir -p "$tls.tmp"
  (
    cd "$tls.tmp"
    # -nodes: unencrypted keys, since the processes read them unattended.
    newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    # Signed with -CA, a certificate still gets openssl.cnf's CA extensions unless told otherwise.
    leaf=(-days 825 -CA ca.pem -CAkey ca-key.pem -addext "basicConstraints=critical,CA:FALSE")
    openssl req -x509 "${newkey[@]}" -days 3650 -subj "/CN=webhookd cluster CA" \
      -keyout ca-key.pem -out ca.pem 2>/dev/null
    openssl req -x509 "${newkey[@]}" "${leaf[@]}" -subj "/CN=localhost" \
      -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "extendedKeyUsage=serverAuth" \
      -keyout server-key.pem -out server.pem 2>/dev/null
    openssl req -x509 "${newkey[@]}" "${leaf[@]}" -subj "/CN=webhookd" \
      -addext "extendedKeyUsage=clientAuth" -keyout client-key.pem -out client.pem 2>/dev/null
    chmod 600 ./*-key.pem
  )
  rm -rf "$tls"
  mv "$tls.tmp" "$tls"
fi

if [ ! -s "$state/secret-key" ]; then
  (umask 077 && openssl rand -base64 32 >"$state/secret-key")
fi
secret_key=$(cat "$state/secret-key")

# What the Temporal CLI and webhookd read (go.temporal.io/sdk/contrib/envconfig).
export TEMPORAL_ADDRESS=127.0.0.1:$frontend_port
export TEMPORAL_NAMESPACE=$namespace
export TEMPORAL_TLS_CLIENT_CERT_PATH=$tls/client.pem
export TEMPORAL_TLS_CLIENT_KEY_PATH=$tls/client-key.pem
export TEMPORAL_TLS_SERVER_CA_CERT_PATH=$tls/ca.pem
export TEMPORAL_TLS_SERVER_NAME=localhost

# What temporal-server.yaml and temporal-ui.yaml read.
export CLUSTER_POSTGRES_PORT=$pg_port
export CLUSTER_FRONTEND_PORT=$frontend_port
export CLUSTER_FRONTEND_HTTP_PORT=$((base + 2))
export CLUSTER_FRONTEND_MEMBERSHIP_PORT=$((base + 3))
export CLUSTER_HISTORY_PORT=$((base + 4))
export CLUSTER_HISTORY_MEMBERSHIP_PORT=$((base + 5))
export CLUSTER_MATCHING_PORT=$((base + 6))
export CLUSTER_MATCHING_MEMBERSHIP_PORT=$((base + 7))
export CLUSTER_WORKER_PORT=$((base + 8))
export CLUSTER_WORKER_MEMBERSHIP_PORT=$((base + 9))
export CLUSTER_TEMPORAL_METRICS_PORT=$((base + 10))
export CLUSTER_UI_PORT=$ui_port
export CLUSTER_TLS_DIR=$tls
export CLUSTER_DYNAMIC_CONFIG=$here/dynamicconfig.yaml
if [ -n "${CLUSTER_DYNAMIC_CONFIG_EXTRA:-}" ]; then
  [ -f "$CLUSTER_DYNAMIC_CONFIG_EXTRA" ] || { echo "CLUSTER_DYNAMIC_CONFIG_EXTRA=$CLUSTER_DYNAMIC_CONFIG_EXTRA is not a file" >&2; exit 1; }
  # A key of the extra file replaces the base file's (its line and the indented lines under it).
  awk 'NR == FNR { if ($0 ~ /^[A-Za-z]/) extra[$1] = 1; next }
    /^[A-Za-z]/ { skip = ($1 in extra) } /^[^ -]/ && !/^[A-Za-z]/ { skip = 0 } !skip' \
    "$CLUSTER_DYNAMIC_CONFIG_EXTRA" "$here/dynamicconfig.yaml" >"$state/dynamicconfig.yaml"
  cat "$CLUSTER_DYNAMIC_CONFIG_EXTRA" >>"$state/dynamicconfig.yaml"
  export CLUSTER_DYNAMIC_CONFIG=$state/dynamicconfig.yaml
fi
case ${CLUSTER_HISTORY_SHARDS:-4} in '' | *[!0-9]* | 0) echo "CLUSTER_HISTORY_SHARDS=$CLUSTER_HISTORY_SHARDS: want a positive number" >&2; exit 1 ;; esac
temporal_env=()
[ -z "${CLUSTER_TEMPORAL_GOGC:-}" ] || temporal_env+=("GOGC=$CLUSTER_TEMPORAL_GOGC")
[ -z "${CLUSTER_TEMPORAL_GOMEMLIMIT:-}" ] || temporal_env+=("GOMEMLIMIT=$CLUSTER_TEMPORAL_GOMEMLIMIT")

started=$SECONDS

# --- PostgreSQL ------------------------------------------------------------------------------

# initdb and postgres refuse to run as root: as root, run them as the postgres user, as the tests do.
as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "running as root and there is no postgres user to run PostgreSQL as: run make postgres" >&2
    exit 1
  fi
  # setpriv execs (runuser would stay as the parent), so the pid file holds the postmaster's pid.
  as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi
if [ ! -f "$pgdir/data/PG_VERSION" ]; then
  echo "creating a PostgreSQL cluster in $pgdir"
  rm -rf "$pgdir"
  mkdir -p "$pgdir"
  if [ ${#as_pg[@]} -gt 0 ]; then
    chown postgres: "$pgdir"
    if ! "${as_pg[@]}" test -w "$pgdir"; then
      echo "the postgres user cannot reach $pgdir: let it through every parent directory (chmod o+x), or set CLUSTER_DIR elsewhere" >&2
      exit 1
    fi
  fi
  # Trust over loopback only: no passwords to manage. A real server uses scram-sha-256.
  (cd "$pgdir" && "${as_pg[@]}" "$pg_bin/initdb" -D "$pgdir/data" -U postgres --auth=trust -E UTF8 \
    >"$logs/initdb.log" 2>&1) || {
    echo "initdb failed; see $logs/initdb.log" >&2
    exit 1
  }
fi
# In the foreground, as a service manager runs it. No Unix socket (-k ''): TCP on loopback only.
# fsync and synchronous_commit on (the defaults): a commit that answered a client, an event's 202
# included, survives a crash of the server (issue 33; e2e/pgcrash_test.go kills it to show it).
pg_settings=(-c max_connections=300)
if [ "${CLUSTER_PG_STATEMENTS:-}" = 1 ]; then
  pg_settings+=(-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=2000)
fi
supervise postgres "${as_pg[@]}" "$pg_bin/postgres" -D "$pgdir/data" -h 127.0.0.1 -p "$pg_port" -k '' \
  "${pg_settings[@]}"
wait_until 60 PostgreSQL postgres "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -U postgres

# psql_as <user> <database> <psql arguments...>, unaligned and without headers, for scripting.
psql_as() {
  local user=$1 db=$2
  shift 2
  "$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U "$user" -d "$db" "$@"
}
if [ "${CLUSTER_PG_STATEMENTS:-}" = 1 ]; then
  psql_as postgres postgres -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
fi
# Each service owns its databases through a role of its own.
for role_db in temporal:temporal temporal:temporal_visibility webhookd:webhookd; do
  role=${role_db%%:*} db=${role_db#*:}
  if [ -z "$(psql_as postgres postgres -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" ]; then
    psql_as postgres postgres -c "CREATE ROLE $role LOGIN"
  fi
  if [ -z "$(psql_as postgres postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
    psql_as postgres postgres -c "CREATE DATABASE $db OWNER $role"
  fi
done

# Temporal's schema, with Temporal's own tool, from the server module the binary was built from.
# setup-schema creates the version table once; update-schema applies what is missing, so a newer
# server version brings its migrations on the next start.
schema=$(cd "$here" && go list -m -f '{{.Dir}}' go.temporal.io/server)/schema/postgresql/v12
if [ ! -d "$schema" ]; then
  echo "Temporal's schema is not in the module cache ($schema): run make cluster, which downloads it" >&2
  exit 1
fi
for db_dir in temporal:temporal temporal_visibility:visibility; do
  db=${db_dir%%:*} dir=$schema/${db_dir#*:}/versioned
  sql=("$sql_tool" --plugin postgres12 --endpoint 127.0.0.1 --port "$pg_port" --user temporal --database "$db")
  if [ "$(psql_as temporal "$db" -c "SELECT to_regclass('schema_version') IS NOT NULL")" != t ]; then
    "${sql[@]}" setup-schema -v 0.0 >>"$logs/schema.log" 2>&1 ||
      { echo "setup-schema of $db failed; see $logs/schema.log" >&2; exit 1; }
  fi
  "${sql[@]}" update-schema -d "$dir" >>"$logs/schema.log" 2>&1 ||
    { echo "update-schema of $db failed; see $logs/schema.log" >&2; exit 1; }
done

# --- Temporal ----------------------------------------------------------------------------------

echo "starting the Temporal server (log: $logs/temporal-server.log)"
# --allow-no-auth: the frontend authenticates clients by certificate but authorizes nothing; a real
# deployment configures an authorizer and claim mapper (docs.temporal.io/self-hosted-guide/security).
supervise temporal-server env "${temporal_env[@]}" "$temporal_server" --root "$here" --config . --env temporal-server \
  --allow-no-auth start
wait_until 120 "Temporal server" temporal-server "$temporal" operator cluster health

out=$("$temporal" operator namespace create --namespace "$namespace" --retention "$retention" 2>&1) ||
  case $out in
    *"already exists"* | *AlreadyExists*) ;;
    *) echo "creating namespace $namespace: $out" >&2; exit 1 ;;
  esac

# webhookd names its own search attributes, one "Name Type" a line, so this list never drifts.
attributes=$("$webhookd" search-attributes)
existing=$("$temporal" operator search-attribute list --namespace "$namespace")
create=()
query=
while read -r name type; do
  [ -n "$name" ] || continue
  grep -qw -- "$name" <<<"$existing" || create+=(--name "$name" --type "$type")
  query+="${query:+ AND }$name IS NULL"
done <<<"$attributes"
if [ ${#create[@]} -gt 0 ]; then
  "$temporal" operator search-attribute create --namespace "$namespace" "${create[@]}" >/dev/null
fi
# Ready when the frontend accepts a visibility query on every attribute: then it knows the namespace
# and its attributes, and starting a workflow with them succeeds.
wait_until 60 "namespace $namespace and its search attributes" temporal-server \
  "$temporal" workflow count --namespace "$namespace" --query "$query"

echo "starting the Temporal Web UI (log: $logs/temporal-ui.log)"
supervise temporal-ui "$temporal_ui" --root "$here" --config . --env temporal-ui start
wait_until 60 "Temporal Web UI" temporal-ui http_ok "$ui_port" /

# --- webhookd ------------------------------------------------------------------------------------

export WEBHOOKD_DATABASE_URL="postgres://webhookd@127.0.0.1:$pg_port/webhookd?sslmode=disable"
export WEBHOOKD_SECRET_KEY=$secret_key
export WEBHOOKD_TEMPORAL_UI_URL=${WEBHOOKD_TEMPORAL_UI_URL:-http://127.0.0.1:$ui_port}

"$webhookd" migrate >>"$logs/migrate.log" 2>&1 || { echo "webhookd migrate failed; see $logs/migrate.log" >&2; exit 1; }
api_key=$("$webhookd" apikey create --owner-email dev@localhost --name "make cluster" 2>>"$logs/migrate.log" | tail -n 1)

# replica <role> <name> <port> starts `webhookd serve --role <role>` with an address and a data dir
# of its own.
replica() {
  mkdir -p "$state/$2"
  supervise "$2" env WEBHOOKD_HTTP_ADDR="127.0.0.1:$3" WEBHOOKD_DATA_DIR="$state/$2" \
    "$webhookd" serve --role "$1"
}
echo "starting webhookd: ${api_names[*]} ${worker_names[*]} (logs: $logs)"
for i in "${!api_names[@]}"; do
  replica "$api_role" "${api_names[i]}" "${api_ports[i]}"
done
for i in "${!worker_names[@]}"; do
  replica worker "${worker_names[i]}" "${worker_ports[i]}"
done
for i in "${!api_names[@]}"; do
  wait_until 60 "webhookd ${api_names[i]}" "${api_names[i]}" http_ok "${api_ports[i]}" /readyz
done
# The worker role serves no /readyz: /healthz is its probe.
for i in "${!worker_names[@]}"; do
  wait_until 60 "webhookd ${worker_names[i]}" "${worker_names[i]}" http_ok "${worker_ports[i]}" /healthz
done

# polling <name> is true when the worker's process polls its task queue: its /healthz says only that
# the process is up, not that it reached Temporal over mTLS.
polling() {
  local pid
  pid=$(cat "$pids/$1.pid") &&
    "$temporal" task-queue describe --task-queue "${WEBHOOKD_TASK_QUEUE:-webhookd}" -o json |
    grep -q "\"identity\": \"$pid@"
}
# The replicas that poll Temporal, and their ports: the workers, or with role all every replica.
pollers=("${worker_names[@]}") poller_ports=("${worker_ports[@]}")
if [ "$api_role" = all ]; then
  pollers=("${api_names[@]}") poller_ports=("${api_ports[@]}")
fi
for name in "${pollers[@]}"; do
  wait_until 60 "webhookd $name polling Temporal" "$name" polling "$name"
done

# joined <port>... is the replicas' URLs, separated by commas; list <word>... the words so.
joined() { printf 'http://127.0.0.1:%s\n' "$@" | paste -sd, -; }
list() { local IFS=,; echo "$*"; }
api_urls=$(joined "${api_ports[@]}")
worker_urls=$(joined "${poller_ports[@]}")
cat >"$state/cluster.env.tmp" <<ENV
API_URLS=$api_urls
WORKER_URLS=$worker_urls
API_REPLICAS=$(list "${api_names[@]}")
WORKER_REPLICAS=$(list "${worker_names[@]}")
TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS
TEMPORAL_NAMESPACE=$namespace
TEMPORAL_TLS_CLIENT_CERT_PATH=$TEMPORAL_TLS_CLIENT_CERT_PATH
TEMPORAL_TLS_CLIENT_KEY_PATH=$TEMPORAL_TLS_CLIENT_KEY_PATH
TEMPORAL_TLS_SERVER_CA_CERT_PATH=$TEMPORAL_TLS_SERVER_CA_CERT_PATH
TEMPORAL_TLS_SERVER_NAME=$TEMPORAL_TLS_SERVER_NAME
TEMPORAL_UI_URL=http://127.0.0.1:$ui_port
DATABASE_URL=$WEBHOOKD_DATABASE_URL
API_KEY=$api_key
SECRET_KEY=$secret_key
ENV
mv "$state/cluster.env.tmp" "$state/cluster.env"

api=http://127.0.0.1:${api_ports[0]}
cat <<BANNER

The webhookd cluster is up (started in $((SECONDS - started))s).
  API replicas:    $api  http://127.0.0.1:${api_ports[1]}   (${api_names[*]}; OpenAPI: $api/openapi.yaml)
  Worker replicas: $worker_urls   (${pollers[*]}; /healthz, /metrics)
  Temporal:        $TEMPORAL_ADDRESS, namespace $namespace, mutual TLS (certificates in $tls)
  Temporal Web UI: http://127.0.0.1:$ui_port
  PostgreSQL:      $WEBHOOKD_DATABASE_URL
  Dev API key:     $api_key

  curl -s -X POST $api/api/svc/v2/webhooks -H 'x-api-key: $api_key' -H 'Content-Type: application/json' -d '{"url":"https://example.com/hooks","eventType":"campaign.created"}'
  curl -s http://127.0.0.1:${api_ports[1]}/api/svc/v2/webhooks -H 'x-api-key: $api_key'
  set -a; . $state/cluster.env; set +a; bin/temporal workflow list   # the CLI over mutual TLS

Logs: $logs/<process>.log; pids: $pids. A process that dies is restarted after 1s. Ctrl-C stops everything.
BANNER

wait "${supervisors[@]}"
