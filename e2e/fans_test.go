//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// TestFanEventsReachReceivers: a lead, a pre-save and a threshold crossing set with the operator
// command each reach their subscribers with the spec's data shape; a refused lead and an
// increment that crosses nothing deliver nothing.
func TestFanEventsReachReceivers(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	for _, et := range []string{"lead.captured", "presave.completed", "analytics.threshold"} {
		st.createWebhook(t, "B", st.rc.url("/"+et), et)
	}
	site := st.createWebsite(t, "fans")
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", site), nil); s != 200 {
		t.Fatalf("publish: %d %v", s, b)
	}

	// The operator sets the threshold with the real command against the same database.
	bin := webhookdBinary(t)
	cmd := exec.Command(bin, "threshold", "set", "--website", fmt.Sprint(site), "--metric", "pageViews", "--value", "100")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATABASE_URL="+st.dbURL)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "threshold set") {
		t.Fatalf("threshold set: %v\n%s", err, out)
	}

	lead := map[string]any{"collectDataId": "blk_9", "email": "fan@example.com", "phone": "+1 415 555 0123", "name": "Zoë",
		"customFields": map[string]string{"city": "Oakland"}, "source": map[string]string{"referrer": "https://t.co/x", "userAgent": "UA", "ipAddress": "203.0.113.9", "country": "US"}}
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/leads", site), lead); s != http.StatusAccepted {
		t.Fatalf("lead: %d %v", s, b)
	}
	lead["email"] = "not-an-email"
	if s, _, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/leads", site), lead); s != 422 {
		t.Fatalf("invalid lead: %d", s)
	}
	presave := map[string]any{"platform": "spotify", "fanEmail": nil, "releaseDate": "2026-12-01T00:00:00Z", "releaseUrl": "https://open.example.com/album/1",
		"boosts": map[string]bool{"followedArtist": true, "savedCatalog": true, "emailCollected": false}}
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/presaves", site), presave); s != http.StatusAccepted {
		t.Fatalf("presave: %d %v", s, b)
	}
	for _, inc := range []int{60, 30, 20, 50} { // crosses 100 on the third
		if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/analytics", site), map[string]any{"metric": "pageViews", "increment": inc}); s != 200 {
			t.Fatalf("analytics: %d %v", s, b)
		}
	}

	want := map[string]string{
		"lead.captured":       fmt.Sprintf(`"data":{"websiteId":%d,"brandId":3,"collectDataId":"blk_9","email":"fan@example.com","phone":"+14155550123","name":"Zoë","customFields":{"city":"Oakland"},"source":{"referrer":"https://t.co/x","userAgent":"UA","ipAddress":"203.0.113.9","country":"US"}}`, site),
		"presave.completed":   fmt.Sprintf(`"data":{"websiteId":%d,"brandId":3,"platform":"spotify","fanEmail":null,"releaseDate":"2026-12-01T00:00:00Z","releaseUrl":"https://open.example.com/album/1","boosts":{"followedArtist":true,"savedCatalog":true,"emailCollected":false}}`, site),
		"analytics.threshold": fmt.Sprintf(`"data":{"websiteId":%d,"brandId":3,"metric":"pageViews","value":110,"threshold":100,"thresholdType":"reached"}`, site),
	}
	for et, data := range want {
		eventually(t, 30*time.Second, et+" delivered", func() bool { return len(deliveredData(t, st, "/"+et)) >= 1 })
		got := deliveredData(t, st, "/"+et)
		if len(got) != 1 || !strings.Contains(got[0], data) {
			t.Fatalf("%s deliveries = %v\nwant one with %s", et, got, data)
		}
	}
	n, err := st.db.NewSelect().Model((*model.Event)(nil)).Where("event_type IN (?, ?, ?)", "lead.captured", "presave.completed", "analytics.threshold").Count(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("fan events stored = %d, %v; want 3", n, err)
	}
}
