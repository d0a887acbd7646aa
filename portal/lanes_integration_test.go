//go:build integration

package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestRetryAndSkipLaneForms (issue 43): with Temporal, a blocked lane's Retry answers the page with
// what it did, and Skip cancels the head (skipped by its owner), so the lane is no longer listed.
func TestRetryAndSkipLaneForms(t *testing.T) {
	tc := temporaltest.Start(t).Client(t)
	// One database, as TestCreateAndDeleteDispatch: both would name the same workflows.
	for _, b := range dbtest.Backends()[:1] {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), withTemporal(t, tc))
			for _, v := range model.Variants {
				t.Run(string(v), func(t *testing.T) {
					f := e.endpointForm(t, v)
					expect(t, e.do(t, "POST", f.page+"/ordering", f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "key": {"data.id"}}), http.StatusOK)
					res, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: f.account.ID, Variant: v, EventType: f.webhook.EventType, Data: `{"id":"c1"}`})
					if err != nil {
						t.Fatal(err)
					}
					head := res.Deliveries[0]
					if err := dbtest.SetDeliveryState(t.Context(), e.db, head.ID, model.DeliveryExhausted); err != nil {
						t.Fatal(err)
					}
					lane := fmt.Sprintf("%s/lanes/%d", f.page, *head.LaneID)
					rec := e.do(t, "POST", lane+"/retry", f.cookie, url.Values{"csrf": {f.csrf}})
					expect(t, rec, http.StatusOK)
					if !shows(rec.Body.String(), "The head of the lane is being sent again") {
						t.Fatalf("retry:\n%s", rec.Body)
					}
					if err := dbtest.SetDeliveryState(t.Context(), e.db, head.ID, model.DeliveryExhausted); err != nil {
						t.Fatal(err)
					}
					rec = e.do(t, "POST", lane+"/skip", f.cookie, url.Values{"csrf": {f.csrf}, "head": {fmt.Sprint(head.ID)}})
					expect(t, rec, http.StatusOK)
					if !shows(rec.Body.String(), "The head of the lane was skipped") || shows(rec.Body.String(), fmt.Sprintf(`id="lane-%d"`, *head.LaneID)) {
						t.Fatalf("skip:\n%s", rec.Body)
					}
					var d model.Delivery
					if err := e.db.NewSelect().Model(&d).Where("id = ?", head.ID).Scan(t.Context()); err != nil {
						t.Fatal(err)
					}
					if d.State != model.DeliveryCanceled || d.LastError == nil || *d.LastError != model.SkippedError {
						t.Fatalf("the skipped head: %s, %v", d.State, d.LastError)
					}
				})
			}
		})
	}
}
