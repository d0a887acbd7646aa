#!/usr/bin/env bash
# Makes sure Node.js and npm are installed: `make bin/node_modules` installs the pinned OpenAPI
# tools (Redocly's linter, the TypeScript client generators, tsc) with npm for the tests of docs/
# (docs/tools_test.go). Debian ships both as packages.
set -euo pipefail

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
Node.js or npm is missing; the tests of the OpenAPI documents need them (Node.js 20 or later).
Install them, then rerun:
  Debian/Ubuntu: sudo apt-get install nodejs npm
  Fedora/RHEL:   sudo dnf install nodejs npm
  macOS:         brew install node
MSG
  exit 1
fi

echo "installing Node.js and npm (Debian's nodejs and npm packages)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
