package api

import (
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestLaneKeyJSON: a lane's key is shown as the JSON value its events hold, a hashed long value as
// a string, the lane of the events without one as null.
func TestLaneKeyJSON(t *testing.T) {
	for _, c := range []struct{ stored, want string }{
		{model.NoLaneKey, "null"},
		{`"cmp_42"`, `"cmp_42"`},
		{`42`, `42`},
		{`1.50`, `1.50`},
		{`true`, `true`},
		{model.HashedKeyPrefix + "9f86d08188", `"sha256:9f86d08188"`},
	} {
		if got := string(laneKeyJSON(c.stored)); got != c.want {
			t.Errorf("key %q shown as %s, want %s", c.stored, got, c.want)
		}
	}
}
