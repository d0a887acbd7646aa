//go:build integration

package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestRetryEnables: a manual retry enables a disabled webhook in both variants.
func TestRetryEnables(t *testing.T) {
	tc := temporaltest.Start(t).Client(t)
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), func(c *envConfig) {
				c.Temporal = tc
				c.Dispatcher = &dispatch.Dispatcher{Client: tc, TaskQueue: "nowhere-" + strings.ReplaceAll(t.Name(), "/", "-")}
			})
			for _, v := range variants {
				t.Run(v.name, func(t *testing.T) {
					auth := v.auth(newKey(t, e.db))
					one := v.collection + "/" + jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"])
					e.do(t, "POST", one+"/disable", auth, "").expect(t, http.StatusOK, "")
					r := e.do(t, "POST", one+"/retry", auth, "")
					r.expect(t, http.StatusAccepted, "")
					v.okEnvelope(t, r)
					checkDisabled(t, v, e.do(t, "GET", one, auth, "").data(t), false, "pending")
				})
			}
		})
	}
}
