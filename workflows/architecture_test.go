package workflows_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestWorkflowsImportNoSideEffects keeps the boundary of this package: workflow code is
// deterministic, so it imports no database, HTTP, metrics or Temporal client package, directly or
// through a package it imports, except through model and activities, which it may import for their
// types and for activity method references (STYLE.md's layout table). It reads the import graph
// from `go list -deps`.
func TestWorkflowsImportNoSideEffects(t *testing.T) {
	pkgs := goListDeps(t, ".")
	const self = "github.com/webhookd/webhookd/workflows"
	// What a workflow may import itself: deterministic parts of the standard library, the SDK's
	// workflow-side packages, and our types.
	allowed := func(p string) bool {
		switch {
		case !strings.Contains(strings.Split(p, "/")[0], "."): // the standard library
			return !slices.Contains(forbiddenStd, p)
		case strings.HasPrefix(p, "go.temporal.io/sdk/"):
			return slices.Contains([]string{"go.temporal.io/sdk/workflow", "go.temporal.io/sdk/temporal", "go.temporal.io/sdk/converter", "go.temporal.io/sdk/log"}, p)
		}
		return p == "github.com/webhookd/webhookd/model" || p == "github.com/webhookd/webhookd/activities"
	}
	for _, p := range pkgs[self] {
		if !allowed(p) {
			t.Errorf("workflows imports %s: workflow code must not (move the code that needs it to an activity or to package dispatch)", p)
		}
	}
	// Nothing reached other than through model, activities or the SDK may be a database, HTTP,
	// metrics or client package: a new import that pulls one in fails here.
	forbidden := []string{"database/sql", "net/http", "github.com/uptrace/bun", "github.com/prometheus/client_golang/prometheus",
		"go.temporal.io/sdk/client", "github.com/labstack/echo/v4", "github.com/webhookd/webhookd/dispatch"}
	seen := map[string]bool{}
	var walk func(p string, path []string)
	walk = func(p string, path []string) {
		if seen[p] {
			return
		}
		seen[p] = true
		if slices.Contains(forbidden, p) {
			t.Errorf("workflows reaches %s through %s", p, strings.Join(path, " -> "))
		}
		if p == "github.com/webhookd/webhookd/model" || p == "github.com/webhookd/webhookd/activities" || strings.HasPrefix(p, "go.temporal.io/") {
			return
		}
		for _, q := range pkgs[p] {
			walk(q, append(path, q))
		}
	}
	walk(self, []string{self})
	if len(seen) < 5 {
		t.Fatalf("the import graph has %d packages: go list read nothing", len(seen))
	}
}

// forbiddenStd are the standard packages a workflow must not import: time and randomness outside
// the workflow's, the network, files and processes, and goroutine synchronisation outside
// workflow.Go and its channels.
var forbiddenStd = []string{"math/rand", "math/rand/v2", "crypto/rand", "net", "net/http", "os", "os/exec", "database/sql", "sync", "io/ioutil", "context"}

// goListDeps returns the imports of pkg and of everything it depends on, by import path.
func goListDeps(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", pkg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}
