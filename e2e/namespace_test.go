//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/workflows"
)

// TestSearchAttributesListedOnce: `webhookd search-attributes`, which scripts feed to the Temporal
// CLI, prints workflows.SearchAttributes, their one definition.
func TestSearchAttributesListedOnce(t *testing.T) {
	out, err := exec.Command(webhookdBinary(t), "search-attributes").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, key := range workflows.SearchAttributes {
		fmt.Fprintf(&want, "%s %s\n", key.GetName(), key.GetValueType())
	}
	if string(out) != want.String() || !strings.Contains(string(out), "WebhookId Int\n") {
		t.Fatalf("webhookd search-attributes printed\n%s\nwant\n%s", out, want.String())
	}
}

// TestStartRefusesNamespaceWithoutSearchAttributes: on a namespace that lacks the search
// attributes, every delivery workflow's start would fail, so webhookd stops at once and says how
// to create them.
func TestStartRefusesNamespaceWithoutSearchAttributes(t *testing.T) {
	srv := temporaltest.Start(t)
	tc := srv.Client(t)
	ns := fmt.Sprintf("bare-%d", time.Now().UnixNano())
	_, err := tc.WorkflowService().RegisterNamespace(t.Context(), &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"worker", "api"} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, webhookdBinary(t), "serve", "--role", role)
		cmd.Env = append(os.Environ(),
			"WEBHOOKD_DATABASE_URL=sqlite:"+t.TempDir()+"/webhookd.db",
			"WEBHOOKD_DATA_DIR="+t.TempDir(),
			"WEBHOOKD_HTTP_ADDR="+freeAddr(t),
			"WEBHOOKD_SECRET_KEY="+base64.StdEncoding.EncodeToString(testSecretKey),
			"TEMPORAL_ADDRESS="+srv.Address,
			"TEMPORAL_NAMESPACE="+ns,
		)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("--role %s on a namespace without search attributes: %v, want exit status 1\n%s", role, err, out.String())
		}
		for _, want := range []string{"search attributes missing", ns, "temporal operator search-attribute create --namespace " + ns + " --name WebhookId --type Int"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--role %s: the output does not say %q:\n%s", role, want, out.String())
			}
		}
	}
}
