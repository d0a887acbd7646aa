#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries (initdb, pg_ctl) are installed: the tests start throwaway
# clusters of their own with them (model/dbtest). Nothing else of the installed package is used.
set -euo pipefail

# Tests pointed at a server of their own start no cluster, so they need no binaries.
if [ -n "${WEBHOOKD_TEST_DATABASE_URL:-}" ]; then
  exit 0
fi

if command -v initdb >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
PostgreSQL server binaries (initdb, pg_ctl) are missing; the tests need them.
Install them, then rerun:
  Debian/Ubuntu: sudo apt-get install postgresql
  Fedora/RHEL:   sudo dnf install postgresql-server
  macOS:         brew install postgresql
Or point the tests at a server you run: WEBHOOKD_TEST_DATABASE_URL=postgres://user@host/db
MSG
  exit 1
fi

echo "installing PostgreSQL (for the tests' throwaway clusters)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null

# The package creates a "main" cluster and may start it. The tests never use it; stop it so it does
# not hold memory and port 5432. Where no service manager runs it never started, hence || true.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters --no-header 2>/dev/null | while read -r version cluster _; do
    pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
  done
fi
