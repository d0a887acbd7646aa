//go:build integration

package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
)

// TestAuditLogRetries: a webhook-wide retry, a delivery's retry and a recovery made through the
// API each appear once in the audit log, with the key as their actor and what they did.
func TestAuditLogRetries(t *testing.T) {
	forEachWithTemporal(t, func(t *testing.T, e *testEnv, v variantCase, tc client.Client) {
		key, keyID, email := auditKey(t, e)
		auth := v.auth(key)
		since := model.Now().Add(-time.Minute)
		hook, d := hookWithDelivery(t, e, v, auth)
		hookID := strconv.FormatInt(d.WebhookID, 10)
		setDeliveryState(t, e, d.ID, model.DeliveryExhausted)
		e.do(t, "POST", hook+"/retry", auth, "").expect(t, http.StatusAccepted, "")
		e.do(t, "POST", fmt.Sprintf("%s/deliveries/%d/retry", hook, d.ID), auth, "").expect(t, http.StatusAccepted, "")
		e.do(t, "POST", hook+"/recover", auth, fmt.Sprintf(`{"since":%q}`, since.Format(time.RFC3339Nano))).expect(t, http.StatusAccepted, "")

		var got []map[string]any
		for _, en := range auditEntries(t, e, v, auth, 50) {
			if en["action"] != "webhook.create" {
				got = append(got, en)
			}
		}
		want := []struct{ action, target, id string }{
			{"recover", "webhook", hookID},
			{"delivery.retry", "delivery", strconv.FormatInt(d.ID, 10)},
			{"retry", "webhook", hookID},
		}
		if len(got) != len(want) {
			t.Fatalf("entries %v, want %v", got, want)
		}
		for i, w := range want {
			target := got[i]["target"].(map[string]any)
			if got[i]["action"] != w.action || target["type"] != w.target || target["id"] != w.id {
				t.Errorf("entry %d: %v on %v, want %s on %s %s", i, got[i]["action"], target, w.action, w.target, w.id)
			}
			if actor := got[i]["actor"].(map[string]any); !reflect.DeepEqual(actor, map[string]any{"kind": "api_key", "id": keyID, "label": email}) {
				t.Errorf("entry %d: actor %v", i, actor)
			}
		}
		if c := got[2]["changes"].(map[string]any); !reflect.DeepEqual(c["count"], map[string]any{"new": float64(1)}) {
			t.Errorf("retry changes %v, want the count of exhausted deliveries retried, 1", c)
		}
	})
}
