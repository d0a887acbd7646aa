package activities_test

import (
	"testing"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/activities/egress"
)

// TestOutcome: the few words the Web UI shows of an attempt, a held one naming what held it.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		r    activities.DeliverResult
		want string
	}{
		{activities.DeliverResult{HostBusy: true, HeldBy: string(egress.HeldByHostCap)}, "held: receiver host at its cap"},
		{activities.DeliverResult{HostBusy: true, HeldBy: string(egress.HeldByEndpointCap)}, "held: endpoint at its cap"},
		{activities.DeliverResult{HostBusy: true, HeldBy: string(egress.HeldByRateLimit)}, "held: endpoint rate limit"},
		{activities.DeliverResult{HostBusy: true, HeldBy: string(egress.HeldByBreaker)}, "held: breaker probe in flight"},
		{activities.DeliverResult{HostBusy: true}, "receiver host busy"},
		{activities.DeliverResult{StatusCode: 500, ErrorClass: activities.ClassHTTPStatus}, "500 from receiver"},
		{activities.DeliverResult{ErrorClass: activities.ClassCircuitOpen}, "paused after repeated failures"},
		{activities.DeliverResult{ErrorClass: activities.ClassTimeout}, "no answer in time"},
	} {
		if got := tc.r.Outcome(); got != tc.want {
			t.Errorf("%+v: Outcome() = %q, want %q", tc.r, got, tc.want)
		}
	}
}
