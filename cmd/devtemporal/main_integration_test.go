//go:build integration

package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/workflows"
)

// TestTrimVisibility runs the Temporal dev server on a file as make run does, with webhookd's
// search attributes, trims its visibility table while it runs, and checks what is left: the Web
// UI's four indexes and one per search attribute, a second trim dropping nothing, and every query
// an operator makes (docs/operations.md) still finding the workflow it should, and only it.
func TestTrimVisibility(t *testing.T) {
	cli, err := temporaltest.CLIPath()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCLI(cli); err != nil {
		t.Fatalf("the tests' Temporal CLI is refused: %v", err)
	}
	path := filepath.Join(t.TempDir(), "temporal.db")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:     cli,
		DBFilename:       path,
		LogLevel:         "error",
		SearchAttributes: temporaltest.SearchAttributes(),
		ClientOptions:    &client.Options{Logger: quiet},
		ExtraArgs:        []string{"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	c := srv.Client()

	before := visibilityIndexes(t, path)
	dropped, err := trimVisibility(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	after := visibilityIndexes(t, path)
	if len(before) < 40 || len(after)+len(dropped) != len(before) {
		t.Fatalf("%d indexes before, %d dropped, %d left", len(before), len(dropped), len(after))
	}
	// The Web UI's four and one for each of webhookd's search attributes.
	if want := len(kept) + len(workflows.SearchAttributes); len(after) != want {
		t.Fatalf("indexes left %v, want %d", after, want)
	}
	for _, k := range kept {
		if !slices.Contains(after, k) {
			t.Errorf("index %s was dropped; the Web UI's list uses it", k)
		}
	}
	if again, err := trimVisibility(ctx, path); err != nil || len(again) != 0 {
		t.Fatalf("a second trim dropped %v (%v), want nothing", again, err)
	}

	// Two workflows with webhookd's search attributes, no worker: the visibility rows are written
	// at the start.
	start := func(id string, webhook int64, event, variant, state string) {
		t.Helper()
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: "trim-test",
			TypedSearchAttributes: temporal.NewSearchAttributes(
				workflows.AttrWebhookID.ValueSet(webhook), workflows.AttrEventType.ValueSet(event),
				workflows.AttrVariant.ValueSet(variant), workflows.AttrDeliveryState.ValueSet(state)),
		}, "DeliveryWorkflow")
		if err != nil {
			t.Fatal(err)
		}
	}
	start("delivery:1:7", 7, "campaign.created", "A", "retrying")
	start("delivery:2:8", 8, "fan.created", "B", "exhausted")
	for query, want := range map[string]string{
		`DeliveryState = "exhausted"`:                                      "delivery:2:8",
		`WebhookId = 7`:                                                    "delivery:1:7",
		`EventType = "fan.created" AND Variant = "B"`:                      "delivery:2:8",
		`WorkflowType = "DeliveryWorkflow" AND DeliveryState = "retrying"`: "delivery:1:7",
		`WorkflowId = "delivery:2:8" AND ExecutionStatus = "Running"`:      "delivery:2:8",
		`TaskQueue = "trim-test" AND Variant = "A"`:                        "delivery:1:7",
	} {
		got := waitList(ctx, t, c, query)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s lists %v, want [%s]", query, got, want)
		}
	}
}

func visibilityIndexes(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// waitList lists the workflow ids a query finds, once the visibility rows of both starts exist
// (the server writes them after answering the start).
func waitList(ctx context.Context, t *testing.T, c client.Client, query string) []string {
	t.Helper()
	for {
		n, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: `WorkflowType = "DeliveryWorkflow"`})
		if err != nil {
			t.Fatal(err)
		}
		if n.GetCount() == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}
