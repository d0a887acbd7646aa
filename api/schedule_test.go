package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model/dbtest"
)

// stalledTemporal is a Temporal that takes as long as the test wants to answer a workflow start:
// it reports each start on entered and answers with what arrives on answer.
type stalledTemporal struct {
	client.Client
	entered chan struct{}
	answer  chan error
}

func (s *stalledTemporal) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	s.entered <- struct{}{}
	return nil, <-s.answer
}

// TestScheduleDoesNotHoldTheDatabase: while a scheduled publish waits on Temporal, another
// account's write on the same SQLite database completes (issue 8: the schedule's transaction held
// the one write lock across the Temporal call). Temporal's answer then decides: refused, the
// schedule is undone and the client gets 503; accepted, it stays and the client gets 202.
func TestScheduleDoesNotHoldTheDatabase(t *testing.T) {
	for _, tc := range []struct {
		name      string
		temporal  error
		status    int
		scheduled bool
	}{
		{"temporal refuses", errors.New("temporal unreachable"), http.StatusServiceUnavailable, false},
		{"temporal accepts", nil, http.StatusAccepted, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := &stalledTemporal{entered: make(chan struct{}), answer: make(chan error, 1)}
			e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) {
				c.Dispatcher = &dispatch.Dispatcher{Client: tmp, TaskQueue: "nowhere"}
			})
			site := variants[1].auth(newKey(t, e.db))
			one := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", site, `{"brandId":1,"slug":"s"}`).data(t)["id"])
			other := variants[0].auth(newKey(t, e.db))
			campaign := "/api/svc/v2/campaigns/" + jsonNumber(e.do(t, "POST", "/api/svc/v2/campaigns", other, campaignBody).data(t)["id"])

			at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			req := httptest.NewRequest("POST", one+"/publish", strings.NewReader(`{"scheduledAt":"`+at+`"}`))
			req.Header.Set("Content-Type", "application/json")
			site(req)
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.srv.ServeHTTP(rec, req)
			}()
			t.Cleanup(func() {
				// A failed test must not leave the publish waiting on the database it closes.
				select {
				case tmp.answer <- errors.New("test over"):
				default:
				}
				<-done
			})
			<-tmp.entered // the publish now waits on Temporal

			e.do(t, "PATCH", campaign, other, `{"budget":99}`).expect(t, http.StatusOK, "")
			select {
			case <-done:
				t.Fatal("the publish finished before Temporal answered")
			default:
			}

			tmp.answer <- tc.temporal
			<-done
			if rec.Code != tc.status {
				t.Fatalf("publish = %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var body struct{ Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if tc.status == http.StatusServiceUnavailable && (body.Code != "unavailable" || rec.Header().Get("Retry-After") == "") {
				t.Fatalf("refused schedule answered %s %v", rec.Body, rec.Header())
			}
			got := e.do(t, "GET", one, site, "").data(t)
			if (got["scheduledAt"] != nil) != tc.scheduled || got["status"] != "draft" {
				t.Fatalf("after Temporal answered %v the website is %v", tc.temporal, got)
			}
		})
	}
}
