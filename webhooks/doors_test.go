package webhooks_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFrontDoorsCallTheUseCases keeps issue 42's boundary, as workflows/architecture_test.go keeps
// the workflows': the front doors (api, portal, the webhookd command) reach the database only
// through the use cases. They call no function of model or sources that takes a context (a query
// or a write), and the configuration of the API and the portal holds services, not the database
// or the Temporal client. The command's wiring opens and migrates the database it hands to the
// services (model.Open, model.Migrate): that is the composition root's, and the only exception.
func TestFrontDoorsCallTheUseCases(t *testing.T) {
	fset := token.NewFileSet()
	stores := map[string]map[string]bool{}
	for _, pkg := range []string{"model", "sources"} {
		stores[pkg] = contextFuncs(t, fset, filepath.Join("..", pkg))
	}
	if len(stores["model"]) < 20 {
		t.Fatalf("found %d functions of model that take a context: the parser read nothing", len(stores["model"]))
	}
	allowed := map[string][]string{filepath.Join("..", "cmd", "webhookd"): {"model.Open", "model.Migrate"}}
	for _, dir := range []string{filepath.Join("..", "api"), filepath.Join("..", "portal"), filepath.Join("..", "cmd", "webhookd")} {
		for _, f := range sourceFiles(t, fset, dir) {
			ast.Inspect(f.file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !stores[pkg.Name][sel.Sel.Name] {
					return true
				}
				name := pkg.Name + "." + sel.Sel.Name
				if !slices.Contains(allowed[dir], name) {
					t.Errorf("%s calls %s, which takes a context: call a use case (webhooks, accounts, sources.Service) instead", fset.Position(call.Pos()), name)
				}
				return true
			})
			// The configuration and the server of a front door hold no database or Temporal client.
			ast.Inspect(f.file, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || dir == filepath.Join("..", "cmd", "webhookd") {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok || (ts.Name.Name != "Config" && ts.Name.Name != "Server") {
					return true
				}
				for _, field := range st.Fields.List {
					if typ := typeString(field.Type); slices.Contains([]string{"*model.DB", "bun.IDB", "*bun.DB", "client.Client"}, typ) {
						t.Errorf("%s: %s holds a %s: hold the services that use it", fset.Position(field.Pos()), ts.Name.Name, typ)
					}
				}
				return true
			})
		}
	}
}

type parsedFile struct {
	path string
	file *ast.File
}

// sourceFiles parses the non-test Go files of dir.
func sourceFiles(t *testing.T, fset *token.FileSet, dir string) []parsedFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []parsedFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, parsedFile{path, f})
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// contextFuncs are the exported package-level functions of the package in dir whose first
// parameter is a context.Context.
func contextFuncs(t *testing.T, fset *token.FileSet, dir string) map[string]bool {
	t.Helper()
	funcs := map[string]bool{}
	for _, f := range sourceFiles(t, fset, dir) {
		for _, d := range f.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || len(fd.Type.Params.List) == 0 {
				continue
			}
			if typeString(fd.Type.Params.List[0].Type) == "context.Context" {
				funcs[fd.Name.Name] = true
			}
		}
	}
	return funcs
}

// typeString writes the type expressions that the test looks for: names, pointers, selectors.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + typeString(e.X)
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	}
	return ""
}
