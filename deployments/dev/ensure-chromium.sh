#!/usr/bin/env bash
# Makes sure Chromium is installed: a Go test (e2e/webui_test.go) drives it headless through the
# Temporal Web UI to find an exhausted delivery and retry it, and writes the screenshots that
# docs/operations.md shows.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
Chromium is missing at /usr/bin/chromium; the Web UI test needs it.
Install it, then rerun:
  Debian:    sudo apt-get install chromium
  Elsewhere: install Chromium or Chrome, and link /usr/bin/chromium to its binary
MSG
  exit 1
fi

echo "installing Chromium (Debian's chromium package)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
