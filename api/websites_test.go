package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestWebsites: validation names the field, transitions follow spec 3.3 with 409 for the invalid
// ones, and another account's website is 404.
func TestWebsites(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			v := variants[1]
			auth := v.auth(newKey(t, e.db))
			created := e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":3,"slug":"spring-tour"}`)
			created.expect(t, http.StatusCreated, "")
			w := created.data(t)
			if w["status"] != "draft" || w["url"] != "https://sites.example.com/spring-tour" || w["publishedAt"] != nil {
				t.Fatalf("created website = %v", w)
			}
			one := fmt.Sprintf("/v2/svc/v2/websites/%s", jsonNumber(w["id"]))

			for _, tc := range []struct {
				name, method, path, body string
				status                   int
				field                    string
			}{
				{"bad slug", "POST", "/v2/svc/v2/websites", `{"brandId":3,"slug":"Spring Tour"}`, 422, "slug"},
				{"missing brand", "POST", "/v2/svc/v2/websites", `{"slug":"x"}`, 422, "brandId"},
				{"brand wrong type", "POST", "/v2/svc/v2/websites", `{"brandId":"3","slug":"x"}`, 400, "brandId"},
				// Issue 8: delivered as JSON to JavaScript, 2^63-1 would arrive as 9223372036854776000.
				{"brand 2^63-1", "POST", "/v2/svc/v2/websites", `{"brandId":9223372036854775807,"slug":"x"}`, 422, "brandId"},
				{"brand 2^63", "POST", "/v2/svc/v2/websites", `{"brandId":9223372036854775808,"slug":"x"}`, 422, "brandId"},
				{"brand 2^53", "POST", "/v2/svc/v2/websites", `{"brandId":9007199254740992,"slug":"x"}`, 422, "brandId"},
				{"brand fraction", "POST", "/v2/svc/v2/websites", `{"brandId":3.5,"slug":"x"}`, 400, "brandId"},
				{"schedule in the past", "POST", one + "/publish", `{"scheduledAt":"` + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + `"}`, 422, "scheduledAt"},
				{"schedule not a time", "POST", one + "/publish", `{"scheduledAt":"soon"}`, 422, "scheduledAt"},
				{"schedule past year 9999 in UTC", "POST", one + "/publish", `{"scheduledAt":"9999-12-31T23:59:59-01:00"}`, 422, "scheduledAt"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					e.do(t, tc.method, tc.path, auth, tc.body).expectError(t, v, tc.status, tc.field)
				})
			}

			intruder := v.auth(newKey(t, e.db))
			for _, req := range [][2]string{{"GET", one}, {"POST", one + "/publish"}, {"POST", one + "/archive"}, {"DELETE", one}} {
				e.do(t, req[0], req[1], intruder, "").expect(t, 404, "not_found")
			}

			published := e.do(t, "POST", one+"/publish", auth, "")
			published.expect(t, 200, "")
			if published.data(t)["status"] != "published" || published.data(t)["publishedAt"] == nil {
				t.Fatalf("published = %v", published.data(t))
			}
			e.do(t, "POST", one+"/publish", auth, "").expect(t, http.StatusConflict, "conflict")
			e.do(t, "POST", one+"/archive", auth, "").expect(t, 200, "")
			e.do(t, "POST", one+"/archive", auth, "").expect(t, http.StatusConflict, "conflict")
			e.do(t, "POST", one+"/publish", auth, "").expect(t, http.StatusConflict, "conflict")
			e.do(t, "DELETE", one, auth, "").expect(t, 200, "")
			e.do(t, "GET", one, auth, "").expect(t, 404, "not_found")
			if n := len(e.do(t, "GET", "/v2/svc/v2/websites", auth, "").list(t)); n != 0 {
				t.Fatalf("deleted website listed: %d", n)
			}
		})
	}
}

// TestScheduleWithTemporalDown: scheduling needs Temporal; when it is unreachable the answer is
// 503 and the website is as before (the saved schedule is undone when its timer cannot start).
func TestScheduleWithTemporalDown(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) {
		c.Dispatcher = &dispatch.Dispatcher{Client: c.Temporal, TaskQueue: "nowhere"}
	})
	auth := variants[1].auth(newKey(t, e.db))
	one := "/v2/svc/v2/websites/" + jsonNumber(e.do(t, "POST", "/v2/svc/v2/websites", auth, `{"brandId":1,"slug":"s"}`).data(t)["id"])
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := e.do(t, "POST", one+"/publish", auth, `{"scheduledAt":"`+at+`"}`)
	r.expect(t, http.StatusServiceUnavailable, "unavailable")
	if got := e.do(t, "GET", one, auth, "").data(t); got["scheduledAt"] != nil || got["status"] != "draft" {
		t.Fatalf("after a refused schedule the website is %v", got)
	}
}
