// Package repo finds the tools the tests run from the repository's bin/ (the Temporal CLI, the
// brokers' servers), which `make test` builds there.
package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Root is the directory of the go.mod above the working directory, which go test sets to the
// package's directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Bin is name under the root's bin/, or an error that says which make target builds it.
func Bin(name, target string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", fmt.Errorf("%w to find bin/%s in: run `make %s` at the module root", err, name, target)
	}
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no %s at %s: run `make %s` at %s", name, p, target, root)
	}
	return p, nil
}
