//go:build integration

package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/webhookd/webhookd/docs"
)

// The documents as integrators' tools read them (issue 41): Redocly's linter with its recommended
// rules, and the common TypeScript client generators, whose output must compile as it comes out.
// The tools are pinned in deployments/dev/npm and installed into bin/node_modules by `make
// bin/node_modules`, a prerequisite of `make test`; without them these tests fail, never skip.
// The Go generator, oapi-codegen, is e2e's TestGeneratedClient.

// npmTool is the path of a pinned npm tool's command.
func npmTool(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "bin", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is needed to read the OpenAPI documents as integrators do (make bin/node_modules installs the pinned tools): %v", name, err)
	}
	return path
}

// runTool runs a tool in dir, failing t with its output when it fails.
func runTool(t *testing.T, dir, what string, command ...string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(command[0], command[1:]...)
	// No telemetry nor update check: the tests run offline, and what they run is pinned.
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
}

// TestRedoclyLint: both documents pass `redocly lint` with the recommended rules, which are its
// defaults; no rule is turned off (there is no redocly.yaml). Warnings are printed, not failed.
func TestRedoclyLint(t *testing.T) {
	runTool(t, ".", "redocly lint", npmTool(t, "redocly"), "lint", "--extends=recommended", "--format=stylish", "openapi.yaml", "webhooks.yaml")
}

// tscFlags are how the generated clients are compiled: tsc's strict mode in a browser project of
// today (ES2022 and the DOM, whose globals a schema's type name must not hide), modules resolved
// as a bundler does. Nothing else is configured, in the compiler or in the generators.
var tscFlags = []string{"--noEmit", "--strict", "--target", "es2022", "--lib", "es2022,dom,dom.iterable",
	"--module", "esnext", "--moduleResolution", "bundler"}

// TestTypeScriptClientsCompile: the clients that openapi-typescript, @hey-api/openapi-ts and orval
// (its default axios client and its fetch client) generate from docs/openapi.yaml, with no
// configuration, compile with tsc.
func TestTypeScriptClientsCompile(t *testing.T) {
	doc, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	modules, err := filepath.Abs(filepath.Join("..", "bin", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	tsc := npmTool(t, "tsc")
	for _, g := range []struct {
		name    string
		command []string
	}{
		{"openapi-typescript", []string{npmTool(t, "openapi-typescript"), doc, "-o", "schema.ts"}},
		{"hey-api", []string{npmTool(t, "openapi-ts"), "-i", doc, "-o", "client"}},
		{"orval-axios", []string{npmTool(t, "orval"), "--input", doc, "--output", "api.ts"}},
		{"orval-fetch", []string{npmTool(t, "orval"), "--input", doc, "--output", "api.ts", "--client", "fetch"}},
	} {
		t.Run(g.name, func(t *testing.T) {
			dir := t.TempDir()
			// The generated code imports what its clients need (axios) as a project would.
			if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
				t.Fatal(err)
			}
			runTool(t, dir, "generate", g.command...)
			var files []string
			err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
				switch {
				case err != nil:
					return err
				case d.IsDir() && d.Name() == "node_modules":
					return filepath.SkipDir
				case strings.HasSuffix(path, ".ts"):
					files = append(files, path)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(files) == 0 {
				t.Fatalf("%s generated no TypeScript", g.name)
			}
			runTool(t, dir, "tsc "+strings.Join(tscFlags, " "), append(append([]string{tsc}, tscFlags...), files...)...)
		})
	}
}

// TestComponentNamesAreNotTypeScriptGlobals: a component's name becomes a type name in every
// generated client, so none may be a global of TypeScript's libraries (ES and the DOM): a type
// named Headers or Error hides the global one in the generated module, and code that means the
// global no longer compiles (orval's fetch client did not with a schema named Headers). The
// globals are read from the pinned compiler's own declarations.
func TestComponentNamesAreNotTypeScriptGlobals(t *testing.T) {
	libs, err := filepath.Glob(filepath.Join("..", "bin", "node_modules", "typescript", "lib", "lib.*.d.ts"))
	if err != nil || len(libs) == 0 {
		t.Fatalf("TypeScript's libraries are needed (make bin/node_modules installs them): %v", err)
	}
	declaration := regexp.MustCompile(`(?m)^(?:declare\s+)?(?:var|let|const|function|class|interface|type|namespace|enum)\s+([A-Za-z_$][\w$]*)`)
	globals := map[string]string{}
	for _, lib := range libs {
		src, err := os.ReadFile(lib)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range declaration.FindAllSubmatch(src, -1) {
			globals[string(m[1])] = filepath.Base(lib)
		}
	}
	if globals["Headers"] == "" || globals["Error"] == "" {
		t.Fatalf("read %d globals from %d libraries, without Headers or Error: the declarations changed shape", len(globals), len(libs))
	}
	for name, raw := range map[string][]byte{"openapi.yaml": docs.OpenAPI, "webhooks.yaml": docs.Webhooks} {
		var doc struct {
			Components map[string]map[string]any `yaml:"components"`
		}
		if err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kinds := make([]string, 0, len(doc.Components))
		for kind := range doc.Components {
			kinds = append(kinds, kind)
		}
		slices.Sort(kinds)
		for _, kind := range kinds {
			for component := range doc.Components[kind] {
				if lib := globals[component]; lib != "" {
					t.Errorf("%s: components.%s.%s is a TypeScript global (%s): generated clients hide the global with it", name, kind, component, lib)
				}
			}
		}
	}
}
