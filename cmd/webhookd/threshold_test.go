package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestThresholdRefusesUnsafeValue (issue 8): a threshold is delivered as analytics.threshold's
// integer "threshold", so one beyond 2^53-1 is refused before anything is stored.
func TestThresholdRefusesUnsafeValue(t *testing.T) {
	// loadConfig's defaults for what the operator's use cases are built with.
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db"), MaxWebhooks: 100, TemporalRequestTimeout: 3 * time.Second}
	err := thresholdCommand(t.Context(), cfg, []string{"set", "--website", "1", "--metric", "pageViews", "--value", "9007199254740992"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "2^53-1") {
		t.Fatalf("threshold set --value 2^53 = %v, want refused", err)
	}
}
