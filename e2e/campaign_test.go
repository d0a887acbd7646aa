//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestCampaignEventsReachReceivers: a submitted campaign reaches campaign.created subscribers, a
// budget change reaches campaign.updated subscribers, with CampaignData exactly; a name-only PATCH
// and a refused submission deliver nothing.
func TestCampaignEventsReachReceivers(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.createWebhook(t, "A", st.rc.url("/created"), "campaign.created")
	st.createWebhook(t, "A", st.rc.url("/updated"), "campaign.updated")

	status, body, _ := st.call(t, "A", "POST", "/api/svc/v2/campaigns", map[string]any{
		"name": "Tour & <friends>", "platform": "tiktok", "budget": 99.99, "startDate": "2026-05-01T10:00:00+02:00", "endDate": "2026-06-01T00:00:00Z"})
	if status != http.StatusCreated {
		t.Fatalf("create campaign: %d %v", status, body)
	}
	id := int64(body["data"].(map[string]any)["id"].(float64))
	if s, b, _ := st.call(t, "A", "POST", "/api/svc/v2/campaigns", map[string]any{"name": "", "platform": "tiktok"}); s != 422 {
		t.Fatalf("invalid campaign: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "campaign.created delivered", func() bool { return len(st.rc.requests("/created")) == 1 })
	wantData := fmt.Sprintf(`{"id":%d,"name":"Tour & <friends>","platform":"tiktok","status":"active","startDate":"2026-05-01T08:00:00.000Z","endDate":"2026-06-01T00:00:00.000Z","budget":99.99}`, id)
	checkCampaignBody(t, st.rc.requests("/created")[0], "campaign.created", wantData)

	if s, b, _ := st.call(t, "A", "PATCH", fmt.Sprintf("/api/svc/v2/campaigns/%d", id), map[string]any{"name": "Tour"}); s != 200 {
		t.Fatalf("rename: %d %v", s, b)
	}
	if s, b, _ := st.call(t, "A", "PATCH", fmt.Sprintf("/api/svc/v2/campaigns/%d", id), map[string]any{"budget": 150}); s != 200 {
		t.Fatalf("budget change: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "campaign.updated delivered", func() bool { return len(st.rc.requests("/updated")) >= 1 })
	wantData = fmt.Sprintf(`{"id":%d,"name":"Tour","platform":"tiktok","status":"active","startDate":"2026-05-01T08:00:00.000Z","endDate":"2026-06-01T00:00:00.000Z","budget":150}`, id)
	checkCampaignBody(t, st.rc.requests("/updated")[0], "campaign.updated", wantData)

	// Everything the API accepted has been delivered once the budget change has: the rename and
	// the refused submission produced no event at all.
	n, err := st.db.NewSelect().Table("events").Where("event_type LIKE 'campaign.%'").Count(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("campaign events stored = %d, %v; want 2", n, err)
	}
	if got := len(st.rc.requests("/updated")) + len(st.rc.requests("/created")); got != 2 {
		t.Fatalf("receiver got %d campaign deliveries, want 2", got)
	}
}

func checkCampaignBody(t *testing.T, r receivedRequest, eventType, wantData string) {
	t.Helper()
	var body struct {
		EventType string          `json:"eventType"`
		Data      json.RawMessage `json:"data"`
		Timestamp string          `json:"timestamp"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.EventType != eventType || string(body.Data) != wantData || r.Header.Get("X-Service-Event") != eventType {
		t.Fatalf("%s body = %s\nwant data %s", eventType, r.Body, wantData)
	}
}
