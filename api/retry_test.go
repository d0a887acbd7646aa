package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestRetryWebhookTemporalDown: with Temporal unreachable a webhook-wide retry answers 503, and its
// deliveries keep their state.
func TestRetryWebhookTemporalDown(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), func(c *envConfig) { c.Dispatcher = &dispatch.Dispatcher{Client: c.Temporal, TaskQueue: "nowhere"} })
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					auth := v.auth(newKey(t, e.db))
					hook, d := hookWithDelivery(t, e, v, auth)
					setDeliveryState(t, e, d.ID, model.DeliveryExhausted)
					e.do(t, "POST", hook+"/retry", auth, "").expectError(t, v, http.StatusServiceUnavailable, "")
					if got := deliveryState(t, e, d.ID); got != model.DeliveryExhausted {
						t.Fatalf("state after a failed retry = %s, want exhausted", got)
					}
					e.do(t, "POST", fmt.Sprintf("%s/deliveries/%d/retry", hook, d.ID), auth, "").expectError(t, v, http.StatusServiceUnavailable, "")
					var after model.Delivery
					if err := e.db.NewSelect().Model(&after).Where("id = ?", d.ID).Scan(context.Background()); err != nil {
						t.Fatal(err)
					}
					if after.State != model.DeliveryExhausted || after.ClaimedAt != nil {
						t.Fatalf("after a failed resend: state %s, claimed at %v; want exhausted and no claim", after.State, after.ClaimedAt)
					}
				})
			}
		})
	}
}
