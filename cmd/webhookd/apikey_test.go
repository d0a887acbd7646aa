package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// lastLine is a command's useful value: the last line it printed.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// apikeyCLI is a database of the test's own and `webhookd apikey` run on it, answering what it
// printed.
func apikeyCLI(t *testing.T) (Config, func(args ...string) (string, error)) {
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db")}
	return cfg, func(args ...string) (string, error) {
		var out bytes.Buffer
		err := apikeyCommand(context.Background(), cfg, args, &out, io.Discard)
		return out.String(), err
	}
}

// TestAPIKeyScopes (issue 46): create --scope issues a key of that scope, which the key
// authenticates with and list shows in its SCOPE column; without --scope the key is manage.
func TestAPIKeyScopes(t *testing.T) {
	ctx := context.Background()
	cfg, cmd := apikeyCLI(t)
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, scope := range []string{"read", "publish", "manage", ""} {
		args := []string{"create", "--owner-email", "scopes@example.com", "--name", "key " + scope}
		want := model.KeyScope(scope)
		if scope == "" {
			want = model.ScopeManage
		} else {
			args = append(args, "--scope", scope)
		}
		out, err := cmd(args...)
		if err != nil {
			t.Fatalf("apikey %v: %v", args, err)
		}
		if !strings.Contains(out, "scope "+string(want)) {
			t.Errorf("create --scope %q printed %q, want it to name scope %s", scope, out, want)
		}
		if _, key, err := model.Authenticate(ctx, db, lastLine(out)); err != nil || key.Scope != want {
			t.Errorf("the key made with --scope %q authenticates as %+v, %v; want scope %s", scope, key, err, want)
		}
	}
	out, err := cmd("list", "--owner-email", "scopes@example.com")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "ID\tKEY\tNAME\tSCOPE\tCREATED\tREVOKED" {
		t.Fatalf("list printed %q: want a header with SCOPE and four keys", out)
	}
	for i, want := range []string{"read", "publish", "manage", "manage"} {
		if f := strings.Split(lines[i+1], "\t"); len(f) != 6 || f[3] != want {
			t.Errorf("list line %q: scope column want %s", lines[i+1], want)
		}
	}
}

// TestAPIKeyCommands: create prints the key alone on its last line; list shows the key by id and
// public prefix only; revoke prints the id on its last line, and the key is refused at once; bad
// arguments are refused before anything is touched.
func TestAPIKeyCommands(t *testing.T) {
	ctx := context.Background()
	cfg, cmd := apikeyCLI(t)
	out, err := cmd("create", "--owner-email", "ops@example.com", "--name", "deploy bot")
	if err != nil {
		t.Fatal(err)
	}
	key := lastLine(out)
	if !strings.HasPrefix(key, model.APIKeyPrefix) {
		t.Fatalf("create's last line %q is not a key", key)
	}

	out, err = cmd("list", "--owner-email", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(lastLine(out), "\t")
	if len(fields) != 6 || fields[2] != "deploy bot" || fields[3] != "manage" || fields[5] != "-" || strings.Contains(out, key) ||
		!strings.HasPrefix(key, strings.TrimSuffix(fields[1], "...")) {
		t.Fatalf("list printed %q: want id, public prefix, name, scope manage (the default), created, not revoked; never the key", out)
	}
	id := fields[0]

	out, err = cmd("revoke", id)
	if err != nil || lastLine(out) != id {
		t.Fatalf("revoke %s = %q, %v; want the id on the last line", id, out, err)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := model.Authenticate(ctx, db, key); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("the revoked key authenticates: %v", err)
	}
	out, _ = cmd("list", "--owner-email", "ops@example.com")
	if f := strings.Split(lastLine(out), "\t"); f[5] == "-" {
		t.Fatalf("list after revoke shows %q, want the revocation time", lastLine(out))
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"revoke", "abc"}, "not a key id"},
		{[]string{"revoke", "0"}, "not a key id"},
		{[]string{"revoke"}, "usage"},
		{[]string{"revoke", "424242"}, "no API key with id 424242"},
		{[]string{"list"}, "--owner-email is required"},
		{[]string{"list", "--owner-email", "nobody@example.com"}, "no account"},
		{[]string{"delete", "1"}, "usage"},
		{[]string{"create", "--owner-email", "ops@example.com", "--scope", "admin"}, `--scope "admin" is not a scope: read, publish or manage`},
		{[]string{"create", "--owner-email", "ops@example.com", "--scope", ""}, `--scope "" is not a scope`},
	} {
		if _, err := cmd(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("apikey %v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
