package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
)

// TestOperatorCommandsAudited: the operator's commands that change an account record each change
// once in its audit log, with the CLI and the command as the actor: a key made and revoked (the
// whole account's, shown in both variants) and a portal link (its variant's). The key itself is
// never recorded.
func TestOperatorCommandsAudited(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db")
	do := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, args, []string{"WEBHOOKD_DATABASE_URL=" + dsn, "WEBHOOKD_DATA_DIR=" + t.TempDir()}, &out, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	key := lastLine(do("apikey", "create", "--owner-email", "ops@example.com", "--name", "bot"))
	link := lastLine(do("portal-link", "--owner-email", "ops@example.com", "--variant", "A"))
	fields := strings.Split(lastLine(do("apikey", "list", "--owner-email", "ops@example.com")), "\t")
	do("apikey", "revoke", fields[0])
	do("apikey", "revoke", fields[0]) // revoked already: no change

	db, err := openDB(ctx, Config{DatabaseURL: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var entries []model.AuditEntry
	if err := db.NewSelect().Model(&entries).OrderExpr("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	want := []struct{ action, variant, label string }{
		{"apikey.create", "", "webhookd apikey create"},
		{"portal_link.create", "A", "webhookd portal-link"},
		{"apikey.revoke", "", "webhookd apikey revoke"},
	}
	if len(entries) != len(want) {
		t.Fatalf("entries %+v, want %d", entries, len(want))
	}
	for i, w := range want {
		e := entries[i]
		if e.Action != w.action || string(e.Variant) != w.variant || e.ActorKind != model.ActorKindCLI || e.ActorID != "" || e.ActorLabel != w.label {
			t.Errorf("entry %d: %+v, want %s in variant %q by cli %q", i, e, w.action, w.variant, w.label)
		}
		if strings.Contains(e.Changes, key) || strings.Contains(e.Changes, strings.TrimPrefix(link, "http://")) {
			t.Errorf("entry %d holds the key or the link: %s", i, e.Changes)
		}
	}
	if entries[0].TargetID != fields[0] || entries[2].TargetID != fields[0] {
		t.Errorf("the key's entries name %s and %s, want its id %s", entries[0].TargetID, entries[2].TargetID, fields[0])
	}
}

// TestOperatorActor: each operator command that changes an account names itself, by its first
// words, as the actor of its changes (webhooks retry and recover as apikey and portal-link do).
func TestOperatorActor(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "retry", "12", "--delivery", "40"}, "webhookd webhooks retry"},
		{[]string{"webhooks", "recover", "12", "--since", "2026-01-01T00:00:00Z"}, "webhookd webhooks recover"},
		{[]string{"apikey", "revoke", "3"}, "webhookd apikey revoke"},
		{[]string{"portal-link", "--owner-email", "o@example.com"}, "webhookd portal-link"},
	} {
		a := audit.ActorOf(operator(context.Background(), tc.args))
		if a.Kind != model.ActorKindCLI || a.ID != "" || a.Label != tc.want {
			t.Errorf("%v: actor %+v, want cli %q", tc.args, a, tc.want)
		}
	}
}
