// Package sourcestest gives tests a made-up version 2 of campaign.created (docs/events.md,
// "Versions"), for the tests that check how versions travel: sources' own, and the wiring of
// cmd/webhookd. No real type has a second version yet.
package sourcestest

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/sources"
)

// CampaignV2 is version 2 of the campaign.* data: budget becomes an object with its currency.
type CampaignV2 struct {
	ID        int64    `json:"id" data:"id"`
	Name      string   `json:"name" data:"text"`
	Platform  string   `json:"platform" data:"text"`
	Status    string   `json:"status" data:"text"`
	StartDate string   `json:"startDate" data:"timeMillis"`
	EndDate   string   `json:"endDate" data:"timeMillis"`
	Budget    BudgetV2 `json:"budget"`
}

// BudgetV2 is version 2's budget.
type BudgetV2 struct {
	Amount   float64 `json:"amount" data:"number"`
	Currency string  `json:"currency" data:"text"`
}

// One campaign in version 1 and in version 2.
const (
	CampaignV1Data = `{"id":7,"name":"Spring","platform":"meta","status":"active","startDate":"2026-03-01T00:00:00.000Z","endDate":"2026-03-31T00:00:00.000Z","budget":1500}`
	CampaignV2Data = `{"id":7,"name":"Spring","platform":"meta","status":"active","startDate":"2026-03-01T00:00:00.000Z","endDate":"2026-03-31T00:00:00.000Z","budget":{"amount":1500,"currency":"EUR"}}`
)

// CampaignV2Down is version 2's down: budget becomes its amount again, in its place; the currency
// is dropped. Its data is canonical JSON, as stored: the budget object is written as BudgetV2 reads.
func CampaignV2Down(data json.RawMessage) (json.RawMessage, error) {
	if !budgetV2.Match(data) {
		return nil, errors.New("budget is not a version 2 budget")
	}
	return budgetV2.ReplaceAll(data, []byte(`"budget":$1`)), nil
}

// budgetV2 is version 2's budget in canonical JSON, its amount the first group.
var budgetV2 = regexp.MustCompile(`"budget":\{"amount":([0-9.eE+-]+),"currency":"[^"]*"\}`)

// AddCampaignV2 adds version 2 of campaign.created for the test's duration. The test must not run
// in parallel with others that read the versions.
func AddCampaignV2(t testing.TB) {
	t.Helper()
	t.Cleanup(sources.AddVersionForTest[CampaignV2]("campaign.created", CampaignV2Down))
}

// Receiver is an HTTPS receiver that keeps the last body it got on each path, for the tests that
// look at what a webhook of a version received.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]byte
}

// NewReceiver starts a Receiver, closed at the test's end.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{bodies: map[string][]byte{}}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies[req.URL.Path] = b
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// Bodies is the last body received on each path, a copy.
func (r *Receiver) Bodies() map[string][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.bodies)
}
