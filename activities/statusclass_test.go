package activities_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestEveryErrorClassHasAStatusClass (issue 46): every attempt error class activities record is
// placed in one of the delivery log's status classes (model.StatusClasses): timeout, tls, the
// network's (model.NetworkErrorClasses), those recorded with an HTTP status (judged by it), or
// known to be other. A new class fails here until it is placed, so that it does not fall into
// "other" by accident.
func TestEveryErrorClassHasAStatusClass(t *testing.T) {
	withStatus := []string{"redirect", "http_status"}
	other := []string{"auth_failed", "mail", "broker_auth", "broker_missing", "broker_refused"}
	placed := slices.Concat([]string{model.StatusTimeout, model.StatusTLS}, model.NetworkErrorClasses, withStatus, other)
	constant := regexp.MustCompile(`(?m)^\s*(?:const\s+)?Class[A-Za-z]+\s*=\s*"([a-z_]+)"`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"egress", "broker"} {
		more, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range constant.FindAllStringSubmatch(string(src), -1) {
			found++
			if !slices.Contains(placed, m[1]) {
				t.Errorf("%s: error class %q is in no status class: add it to model.NetworkErrorClasses or to this test's lists", f, m[1])
			}
		}
	}
	if found < 15 {
		t.Fatalf("found %d error classes; the pattern no longer matches how they are declared", found)
	}
}
