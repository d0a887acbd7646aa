package activities_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestAttemptThatDeliveredIsNotSentAgain: an attempt that delivered and runs again with the same
// number (its result was lost: a first attempt run as a local activity whose workflow task a
// signal failed, as a recovery asked during the attempt did in TestRecoverCoversAttemptsInFlight)
// answers delivered from the record and sends nothing; the next attempt number, a resend's, is
// sent.
func TestAttemptThatDeliveredIsNotSentAgain(t *testing.T) {
	var received atomic.Int32
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	f := newAttemptFixture(t, receiver, nil)

	if res := f.attempt(t, 1); !res.Delivered || res.Recorded {
		t.Fatalf("first attempt: %+v; want delivered and sent", res)
	}
	if res := f.attempt(t, 1); !res.Delivered || !res.Recorded {
		t.Fatalf("the same attempt again: %+v; want delivered from the record", res)
	}
	if got := received.Load(); got != 1 {
		t.Fatalf("the receiver got %d requests after attempt 1 ran twice, want 1", got)
	}
	if res := f.attempt(t, 2); !res.Delivered || res.Recorded {
		t.Fatalf("a resend's attempt: %+v; want delivered and sent", res)
	}
	if got := received.Load(); got != 2 {
		t.Fatalf("the receiver got %d requests after a resend, want 2", got)
	}
}
