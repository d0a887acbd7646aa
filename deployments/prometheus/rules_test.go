//go:build integration

// Package prometheus_test checks the Prometheus configuration and alerting rules beside it with
// promtool: they parse, and alerts_test.yml fires and clears each alert as it expects.
package prometheus_test

import (
	"os/exec"
	"testing"
)

// TestAlertRules fails, never skips, without promtool: `make test` installs it
// (deployments/dev/ensure-promtool.sh).
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to test alerts.yml (make promtool, or deployments/dev/ensure-promtool.sh): %v", err)
	}
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"},
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
