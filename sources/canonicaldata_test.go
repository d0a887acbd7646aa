package sources_test

import (
	"math"
	"testing"
	"time"

	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/wire"
)

// TestEventDataIsCanonical: the data sources writes for its own events is already in the canonical
// form receivers verify, the bytes wire.CanonicalJSON would give, for the values where
// encoding/json and JavaScript part ways: HTML characters, U+2028, control characters, invalid
// UTF-8, integers past 2^53, -0 and numbers JavaScript writes with an exponent.
func TestEventDataIsCanonical(t *testing.T) {
	at := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	texts := []string{"plain", "<b>Tom & Jerry</b>", "line\u2028para\u2029", "tab\tnul\x00del\x7f", "bad \xff utf-8", "emoji 🎉 é", `quote " back \ slash /`}
	budgets := []float64{0, math.Copysign(0, -1), 0.1 + 0.2, 1e21, 1.5e-7, 123e18, 1234.5, math.MaxFloat64}
	ids := []int64{1, 1<<53 + 1, math.MaxInt64}
	check := func(what, data string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		canonical, err := wire.CanonicalJSON([]byte(data))
		if err != nil || string(canonical) != data {
			t.Errorf("%s = %q, canonical %q (%v)", what, data, canonical, err)
		}
	}
	for i, text := range texts {
		id := ids[i%len(ids)]
		c := &sources.Campaign{ID: id, Name: text, Platform: "meta", Status: "active", Budget: budgets[i%len(budgets)], StartDate: at, EndDate: at}
		data, err := c.EventData()
		check("campaign data", data, err)
		w := &sources.Website{ID: id, BrandID: id, Slug: text, PublishedAt: &at, ArchivedAt: &at}
		data, err = w.PublishedData("https://example.com/"+text, i%2 == 0)
		check("website.published data", data, err)
		data, err = w.ArchivedData()
		check("website.archived data", data, err)
	}
	for _, budget := range budgets {
		data, err := (&sources.Campaign{ID: 1, Budget: budget, StartDate: at, EndDate: at}).EventData()
		check("campaign data", data, err)
	}
}
