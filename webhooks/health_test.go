package webhooks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// TestHealthRange: the two ranges by name, 24h by default, anything else a malformed range.
func TestHealthRange(t *testing.T) {
	for _, c := range []struct {
		in, name string
		length   time.Duration
	}{{"", "24h", 24 * time.Hour}, {"24h", "24h", 24 * time.Hour}, {"7d", "7d", 7 * 24 * time.Hour}} {
		if name, length, err := webhooks.HealthRange(c.in); err != nil || name != c.name || length != c.length {
			t.Errorf("HealthRange(%q) = %q, %v, %v", c.in, name, length, err)
		}
	}
	for _, bad := range []string{"1y", "24H", "1d", " 24h"} {
		var invalid *webhooks.InvalidError
		if _, _, err := webhooks.HealthRange(bad); !errors.As(err, &invalid) || invalid.Field != "range" || !invalid.Malformed {
			t.Errorf("HealthRange(%q): err = %v, want a malformed range", bad, err)
		}
	}
}

// TestTally: the hours from the one holding since are summed, earlier ones left out; the success
// rate is a share of the attempts, nil without any.
func TestTally(t *testing.T) {
	h0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	buckets := []model.HourBucket{
		{Hour: h0, Delivered: 5, Retried: 1},
		{Hour: h0.Add(time.Hour), Delivered: 1, Retried: 1, Failed: 1},
		{Hour: h0.Add(2 * time.Hour), Delivered: 2},
	}
	if got := webhooks.Tally(buckets, h0.Add(time.Hour+30*time.Minute)); got != (webhooks.Totals{Delivered: 3, Retried: 1, Failed: 1}) {
		t.Fatalf("Tally = %+v", got)
	}
	all := webhooks.Tally(buckets, h0)
	if r := all.SuccessRate(); all.Attempts() != 11 || r == nil || *r != 8.0/11 {
		t.Fatalf("all hours: %+v, rate %v", all, r)
	}
	if r := webhooks.Tally(buckets, h0.Add(3*time.Hour)).SuccessRate(); r != nil {
		t.Fatalf("no attempts: rate %v, want nil", *r)
	}
}
