package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPinnedCLIIsTheMakefiles: the CLI the trim accepts is the one the Makefile installs.
func TestPinnedCLIIsTheMakefiles(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TEMPORAL_CLI_VERSION := (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no TEMPORAL_CLI_VERSION in the Makefile")
	}
	if string(m[1]) != pinnedCLI {
		t.Fatalf("the Makefile pins the Temporal CLI %s, devtemporal %s", m[1], pinnedCLI)
	}
}

// TestCheckCLIRefusesAnotherBinary: a binary that is not the pinned CLI (this test's own, of
// module github.com/webhookd/webhookd) is refused, saying what it is; a file that is no Go binary
// too.
func TestCheckCLIRefusesAnotherBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCLI(self); err == nil || !strings.Contains(err.Error(), "github.com/webhookd/webhookd") || !strings.Contains(err.Error(), pinnedCLI) {
		t.Fatalf("checkCLI(the test binary) = %v, want a refusal naming what it is and the pinned CLI", err)
	}
	if err := checkCLI("../../Makefile"); err == nil {
		t.Fatal("checkCLI(the Makefile) accepted it")
	}
}
