//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// TestStopLetsAttemptsFinish: a worker stopped during a deploy lets the POST in flight finish
// and records it, instead of cutting it and sending it again later. Without a stop timeout the
// same POST is cut, which shows the test can tell the two apart.
func TestStopLetsAttemptsFinish(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stopTimeout time.Duration
		wantCut     bool
	}{
		{"with a stop timeout", 10 * time.Second, false},
		{"without", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStack(t, stackOptions{allowPrivate: true, timeout: 5 * time.Second, schedule: []time.Duration{time.Hour}, stopTimeout: tc.stopTimeout})
			started, cut := make(chan struct{}, 1), make(chan bool, 1)
			slow := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				started <- struct{}{}
				select {
				case <-time.After(1500 * time.Millisecond):
					w.WriteHeader(http.StatusNoContent)
					cut <- false
				case <-r.Context().Done():
					cut <- true
				}
			}))
			slow.StartTLS()
			t.Cleanup(slow.Close)
			id, _ := st.createWebhook(t, "A", slow.URL+"/slow", "campaign.created")
			eventID := st.publish(t, "A", "campaign.created", campaign)
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the attempt never reached the receiver")
			}
			st.stopWorker()
			if got := <-cut; got != tc.wantCut {
				t.Fatalf("POST cut by the stop = %v, want %v", got, tc.wantCut)
			}
			if !tc.wantCut {
				if d := st.delivery(t, eventID, id); d.State != model.DeliveryDelivered || d.Attempts != 1 {
					t.Errorf("after the stop the delivery is %s with %d attempts, want delivered with 1", d.State, d.Attempts)
				}
			}
		})
	}
}
