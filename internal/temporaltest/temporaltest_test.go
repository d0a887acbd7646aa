//go:build integration

package temporaltest_test

import (
	"testing"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/workflows"
)

func TestMain(m *testing.M) { temporaltest.Main(m) }

func TestStartServesHealthyServerOnce(t *testing.T) {
	s := temporaltest.Start(t)
	if again := temporaltest.Start(t); again != s {
		t.Fatalf("second Start returned %+v, want the first server %+v", again, s)
	}
	c := s.Client(t)
	if _, err := c.CheckHealth(t.Context(), &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("health check: %v", err)
	}
}

func TestSearchAttributesAreRegistered(t *testing.T) {
	s := temporaltest.Start(t)
	resp, err := s.Client(t).OperatorService().ListSearchAttributes(t.Context(), &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	if len(workflows.SearchAttributes) == 0 {
		t.Fatal("workflows.SearchAttributes is empty")
	}
	for _, key := range workflows.SearchAttributes {
		got, ok := resp.GetCustomAttributes()[key.GetName()]
		if !ok {
			t.Errorf("search attribute %s is not registered", key.GetName())
			continue
		}
		if got != key.GetValueType() {
			t.Errorf("search attribute %s has type %s, want %s", key.GetName(), got, key.GetValueType())
		}
	}
}
