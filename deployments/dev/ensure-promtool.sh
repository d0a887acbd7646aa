#!/usr/bin/env bash
# Makes sure promtool is installed: a Go test (deployments/prometheus) runs `promtool check rules`
# and `promtool test rules` on the alerting rules. Debian ships it in the prometheus package; only
# promtool is used, the server the package installs is stopped.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<'MSG'
promtool is missing; the tests of the alerting rules need it.
Install it, then rerun:
  Debian/Ubuntu: sudo apt-get install prometheus
  Fedora/RHEL:   sudo dnf install golang-github-prometheus
  macOS:         brew install prometheus
  Anywhere:      the prometheus-*.tar.gz release from https://prometheus.io/download/ has promtool
MSG
  exit 1
fi

echo "installing promtool (Debian's prometheus package)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null

# The package may start a Prometheus server where a service manager runs; the tests never use it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl stop prometheus >/dev/null 2>&1 || true
fi
