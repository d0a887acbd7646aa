// Package grafana_test checks the Grafana dashboard beside it: it imports on any Grafana (its
// panels query the data source variable, ids are unique) and every query is valid PromQL, checked
// by promtool. worker's TestDashboardAndAlertsUseRealMetrics checks the metric names it queries
// against a running webhookd.
package grafana_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type dashboard struct {
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
	// Templating holds the data source variable and the query variables.
	Templating struct {
		List []struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			Query      any    `json:"query"`
			Datasource any    `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

const dsVariable = "${DS_PROMETHEUS}"

func load(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile("webhookd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("webhookd.json: %v", err)
	}
	return d
}

// TestDashboardIsImportable: no hard-coded data source, unique panel ids, every query panel has
// queries with their own refIds.
func TestDashboardIsImportable(t *testing.T) {
	d := load(t)
	if d.UID == "" {
		t.Error("the dashboard has no uid: every import would make a new copy")
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "DS_PROMETHEUS" && v.Query == "prometheus" {
			hasDS = true
		}
	}
	if !hasDS {
		t.Error("no data source variable DS_PROMETHEUS of type prometheus")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource["uid"] != dsVariable || len(p.Targets) == 0 || p.GridPos.W == 0 {
			t.Errorf("panel %q: datasource %v, %d queries, gridPos %+v", p.Title, p.Datasource, len(p.Targets), p.GridPos)
		}
		refs := map[string]bool{}
		for _, target := range p.Targets {
			if target.Expr == "" || target.RefID == "" || refs[target.RefID] || target.Datasource["uid"] != dsVariable {
				t.Errorf("panel %q: query %+v", p.Title, target)
			}
			refs[target.RefID] = true
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("only %d queries", queries)
	}
}

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
