package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReplayDryRunAndRefusals: a dry run needs no Temporal and answers what a replay would match;
// a real replay without Temporal is 503 and keeps nothing; every bad field is refused naming it.
func TestReplayDryRunAndRefusals(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		f := newAccountLogFixture(t, e, v)
		path := f.prefix + "/replays"
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

		// The fixture: ids[0] exhausted after a 503, ids[1] delivered, the rest pending.
		for _, tc := range []struct {
			body string
			want []int64
		}{
			{fmt.Sprintf(`{"since":%q,"dryRun":true}`, since), append([]int64{f.ids[0]}, f.ids[2:]...)},
			{fmt.Sprintf(`{"since":%q,"states":["exhausted"],"dryRun":true}`, since), f.ids[:1]},
			{fmt.Sprintf(`{"since":%q,"states":["delivered"],"dryRun":true}`, since), f.ids[1:2]},
			{fmt.Sprintf(`{"since":%q,"statusClasses":["5xx","2xx"],"states":["exhausted","delivered"],"dryRun":true}`, since), f.ids[:2]},
			{fmt.Sprintf(`{"since":%q,"webhookIds":[%d],"states":["delivered","exhausted","pending"],"dryRun":true}`, since, f.hooks[1]), nil},
			{`{"since":"2020-01-01T00:00:00Z","until":"2020-01-02T00:00:00Z","dryRun":true}`, []int64{}},
			{fmt.Sprintf(`{"since":%q,"filter":{"data":{"nothing":{"$exist":true}}},"dryRun":true}`, since), []int64{}},
			{fmt.Sprintf(`{"since":%q,"filter":{},"states":["pending"],"dryRun":true}`, since), f.ids[2:]},
		} {
			r := e.do(t, "POST", path, f.auth, tc.body)
			r.expect(t, http.StatusOK, "")
			v.okEnvelope(t, r)
			got := listOfIDs(r.data(t)["firstIds"])
			if tc.want == nil { // the second webhook's: every other delivery, in id order
				for _, d := range got {
					if !containsID(f.ids, d) {
						t.Fatalf("%s: %v holds another account's delivery", tc.body, got)
					}
				}
				if len(got) != 3 {
					t.Fatalf("%s: %v, want the second webhook's 3", tc.body, got)
				}
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || r.data(t)["matched"] != float64(len(tc.want)) || r.data(t)["dryRun"] != true {
				t.Fatalf("%s: %s, want %v", tc.body, r.raw, tc.want)
			}
		}
		// The other account's dry run matches none of these.
		other := e.do(t, "POST", path, f.otherAuth, fmt.Sprintf(`{"since":%q,"webhookIds":[%d],"dryRun":true}`, since, f.hooks[0]))
		other.expect(t, http.StatusOK, "")
		if other.data(t)["matched"] != float64(0) {
			t.Fatalf("the other account's dry run: %s", other.raw)
		}
		// No Temporal here: a real replay is 503, and nothing is kept.
		e.do(t, "POST", path, f.auth, fmt.Sprintf(`{"since":%q}`, since)).expectError(t, v, http.StatusServiceUnavailable, "")
		var kept int
		if err := e.db.NewSelect().TableExpr("replays").ColumnExpr("COUNT(*)").Scan(t.Context(), &kept); err != nil || kept != 0 {
			t.Fatalf("replays kept: %d, %v", kept, err)
		}

		long := `["none"` + strings.Repeat(`,"none"`, 100) + `]`
		for _, bad := range []struct {
			body   string
			status int
			field  string
		}{
			{`{"dryRun":true}`, 422, "since"},
			{`{"since":"yesterday","dryRun":true}`, 400, "since"},
			{`{"since":"2020-01-02T00:00:00Z","until":"2020-01-01T00:00:00Z","dryRun":true}`, 422, "since"},
			{`{"since":"2999-01-01T00:00:00Z","dryRun":true}`, 422, "since"},
			{`{"since":"2020-01-01T00:00:00Z","until":"soon","dryRun":true}`, 400, "until"},
			{`{"since":"2020-01-01T00:00:00Z","states":["bogus"],"dryRun":true}`, 400, "states"},
			{`{"since":"2020-01-01T00:00:00Z","states":["canceled"],"dryRun":true}`, 422, "states"},
			{`{"since":"2020-01-01T00:00:00Z","statusClasses":["7xx"],"dryRun":true}`, 400, "statusClasses"},
			{`{"since":"2020-01-01T00:00:00Z","statusClasses":` + long + `,"dryRun":true}`, 422, "statusClasses"},
			{fmt.Sprintf(`{"since":"2020-01-01T00:00:00Z","eventTypes":[%q],"dryRun":true}`, v.foreignEventType), 400, "eventTypes"},
			{`{"since":"2020-01-01T00:00:00Z","webhookIds":[0],"dryRun":true}`, 400, "webhookIds"},
			{`{"since":"2020-01-01T00:00:00Z","webhookIds":["x"],"dryRun":true}`, 400, "webhookIds"},
			{`{"since":"2020-01-01T00:00:00Z","filter":{"data":{"$bogus":1}},"dryRun":true}`, 400, "filter.data.$bogus"},
			{`{"since":"2020-01-01T00:00:00Z","filter":[1],"dryRun":true}`, 400, "filter"},
			{`{"since":"2020-01-01T00:00:00Z","dryRun":"yes"}`, 400, "dryRun"},
			{`{"since":"2020-01-01T00:00:00Z","extra":1}`, 400, "extra"},
		} {
			e.do(t, "POST", path, f.auth, bad.body).expectError(t, v, bad.status, bad.field)
		}
		e.do(t, "GET", path+"/x", f.auth, "").expectError(t, v, http.StatusBadRequest, "id")
		e.do(t, "GET", path+"/999999", f.auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "DELETE", path+"/999999", f.auth, "").expectError(t, v, http.StatusNotFound, "")
	})
}

func listOfIDs(v any) []int64 {
	out := []int64{}
	for _, x := range v.([]any) {
		out = append(out, int64(x.(float64)))
	}
	return out
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
