//go:build integration

package grafana_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDashboardQueriesParse runs every query, with Grafana's variables replaced, through
// `promtool check rules` as a recording rule. It fails, never skips, without promtool: `make test`
// installs it (deployments/dev/ensure-promtool.sh).
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is needed to check the dashboard's queries (make promtool, or deployments/dev/ensure-promtool.sh): %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "${variant}", ".*", "$variant", ".*", "${task_queue}", ".*", "$task_queue", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range load(t).Panels {
		for _, target := range p.Targets {
			n++
			expr := vars.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: unknown variable in %s", p.Title, target.Expr)
			}
			fmt.Fprintf(&rules, "      - record: dashboard_query_%d # %s\n        expr: %s\n", n, p.Title, strconv.Quote(expr))
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s\n%s", err, out, rules.String())
	}
}
