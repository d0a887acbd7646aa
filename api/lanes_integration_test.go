//go:build integration

package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
)

// TestRetryAndSkipLane (issue 43): a blocked lane's head is sent again (202, the lane as it is
// after); skipping the head marks it canceled, skipped by its owner, and the lane's head is the
// next delivery; once nothing is left the lane is idle and a skip is 409. Another account's
// webhook is 404.
func TestRetryAndSkipLane(t *testing.T) {
	forEachWithTemporal(t, func(t *testing.T, e *testEnv, v variantCase, tc client.Client) {
		auth := v.auth(newKey(t, e.db))
		hook := orderedHook(t, e, v, auth, "k1", "k1")
		lanes := e.do(t, "GET", hook+"/lanes", auth, "").list(t)
		if len(lanes) != 1 {
			t.Fatalf("lanes = %v, want one", lanes)
		}
		laneID := int64(lanes[0].(map[string]any)["id"].(float64))
		lane := fmt.Sprintf("%s/lanes/%d", hook, laneID)
		ids := laneDeliveries(t, e, laneID)
		setDeliveryState(t, e, ids[0], model.DeliveryExhausted)

		r := e.do(t, "POST", lane+"/retry", auth, "")
		r.expect(t, http.StatusAccepted, "")
		v.okEnvelope(t, r)
		if head, _ := r.data(t)["head"].(map[string]any); head == nil || head["deliveryId"] != float64(ids[0]) {
			t.Fatalf("retry = %s, want the lane with head %d", r.raw, ids[0])
		}

		// A skip that names a head the lane does not have skips nothing.
		e.do(t, "POST", fmt.Sprintf("%s/skip?head=%d", lane, ids[1]), auth, "").expectError(t, v, http.StatusConflict, "head")
		e.do(t, "POST", lane+"/skip?head=x", auth, "").expectError(t, v, http.StatusBadRequest, "head")
		r = e.do(t, "POST", fmt.Sprintf("%s/skip?head=%d", lane, ids[0]), auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		head, _ := r.data(t)["head"].(map[string]any)
		if head == nil || head["deliveryId"] != float64(ids[1]) || head["sequence"] != 2.0 || r.data(t)["waiting"] != 0.0 {
			t.Fatalf("skip = %s, want the lane with head %d (sequence 2)", r.raw, ids[1])
		}
		var skipped model.Delivery
		if err := e.db.NewSelect().Model(&skipped).Where("id = ?", ids[0]).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if skipped.State != model.DeliveryCanceled || skipped.LastError == nil || *skipped.LastError != model.SkippedError {
			t.Fatalf("skipped head: state %s, last error %v", skipped.State, skipped.LastError)
		}

		// The same request made again (a client's retry) skips nothing more.
		e.do(t, "POST", fmt.Sprintf("%s/skip?head=%d", lane, ids[0]), auth, "").expectError(t, v, http.StatusConflict, "head")
		if got := deliveryState(t, e, ids[1]); got == model.DeliveryCanceled {
			t.Fatalf("a repeated skip of delivery %d skipped the next, %d", ids[0], ids[1])
		}
		e.do(t, "POST", lane+"/skip", auth, "").expect(t, http.StatusOK, "")
		e.do(t, "POST", lane+"/skip", auth, "").expectError(t, v, http.StatusConflict, "")
		// Each skip made is in the audit log once, naming the skipped delivery; the refused ones
		// are not (issue 46).
		var skips []string
		for _, it := range e.do(t, "GET", strings.TrimSuffix(v.collection, "/webhooks")+"/audit-log", auth, "").list(t) {
			if en := it.(map[string]any); en["action"] == "lane.skip" {
				skips = append(skips, en["target"].(map[string]any)["id"].(string))
			}
		}
		if want := []string{fmt.Sprint(ids[1]), fmt.Sprint(ids[0])}; !slices.Equal(skips, want) {
			t.Fatalf("lane.skip entries for deliveries %v, want %v (newest first)", skips, want)
		}
		e.do(t, "POST", lane+"/retry", auth, "").expectError(t, v, http.StatusConflict, "")
		e.do(t, "POST", lane+"/retry", v.auth(newKey(t, e.db)), "").expectError(t, v, http.StatusNotFound, "")
	})
}
