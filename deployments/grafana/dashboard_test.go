// Package grafana_test checks the Grafana dashboard beside it: it imports on any Grafana (its
// panels query the data source variable, ids are unique) and every query is valid PromQL, checked
// by promtool. worker's TestDashboardAndAlertsUseRealMetrics checks the metric names it queries
// against a running webhookd.
package grafana_test

import (
	"encoding/json"
	"os"
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
