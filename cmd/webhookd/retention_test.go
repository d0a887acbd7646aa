package main

import (
	"strings"
	"testing"
	"time"
)

// TestConfigRetention: 30 days by default, 0 keeps everything, and a retention that an exhausted
// delivery's retry window (plus a day) would outlast is refused, naming both variables.
func TestConfigRetention(t *testing.T) {
	for _, tc := range []struct {
		env     []string
		want    time.Duration
		wantErr string
	}{
		{nil, 720 * time.Hour, ""},
		{[]string{"WEBHOOKD_RETENTION=0"}, 0, ""},
		{[]string{"WEBHOOKD_RETENTION=2160h"}, 2160 * time.Hour, ""},
		{[]string{"WEBHOOKD_RETENTION=192h"}, 192 * time.Hour, ""}, // exactly the 168h window plus a day
		{[]string{"WEBHOOKD_RETENTION=48h", "WEBHOOKD_RETRY_WINDOW=1h"}, 48 * time.Hour, ""},
		{[]string{"WEBHOOKD_RETENTION=168h"}, 0, "WEBHOOKD_RETRY_WINDOW (168h0m0s) plus a day"},
		{[]string{"WEBHOOKD_RETENTION=12h", "WEBHOOKD_RETRY_WINDOW=1m"}, 0, "WEBHOOKD_RETENTION: 12h0m0s is less than WEBHOOKD_RETRY_WINDOW"},
		{[]string{"WEBHOOKD_RETENTION=30d"}, 0, "WEBHOOKD_RETENTION"},
		{[]string{"WEBHOOKD_RETENTION=-1h"}, 0, "WEBHOOKD_RETENTION"},
	} {
		cfg, err := loadConfig(tc.env)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.wantErr == "" && cfg.Retention != tc.want:
			t.Errorf("%v: retention %v, want %v", tc.env, cfg.Retention, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: err = %v, want one containing %q", tc.env, err, tc.wantErr)
		}
	}
}
