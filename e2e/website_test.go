//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/workflows"
)

func (st *stack) createWebsite(t *testing.T, slug string) int64 {
	t.Helper()
	status, body, _ := st.call(t, "B", "POST", "/v2/svc/v2/websites", map[string]any{"brandId": 3, "slug": slug})
	if status != http.StatusCreated || body["data"].(map[string]any)["status"] != "draft" {
		t.Fatalf("create website: %d %v", status, body)
	}
	return int64(body["data"].(map[string]any)["id"].(float64))
}

func deliveredData(t *testing.T, st *stack, path string) []string {
	t.Helper()
	var out []string
	for _, r := range st.rc.requests(path) {
		var body struct {
			Event string         `json:"event"`
			Data  map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Event != model.EventTest {
			out = append(out, string(r.Body))
		}
	}
	return out
}

// TestWebsiteLifecycleEvents: publishing now and archiving reach their subscribers with the spec's
// data; invalid transitions are 409 and emit nothing.
func TestWebsiteLifecycleEvents(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.createWebhook(t, "B", st.rc.url("/published"), "website.published")
	st.createWebhook(t, "B", st.rc.url("/archived"), "website.archived")
	id := st.createWebsite(t, "spring-tour")

	status, body, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", id), nil)
	if status != 200 || body["data"].(map[string]any)["status"] != "published" {
		t.Fatalf("publish: %d %v", status, body)
	}
	publishedAt := body["data"].(map[string]any)["publishedAt"]
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", id), nil); s != http.StatusConflict || b["code"] != "conflict" {
		t.Fatalf("publish twice: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "website.published delivered", func() bool { return len(deliveredData(t, st, "/published")) == 1 })
	wantPublished := fmt.Sprintf(`"data":{"websiteId":%d,"brandId":3,"slug":"spring-tour","url":"https://sites.example.com/spring-tour","publishedAt":%q,"scheduledPublish":false}`, id, publishedAt)
	if got := deliveredData(t, st, "/published")[0]; !strings.Contains(got, wantPublished) {
		t.Fatalf("website.published body = %s\nwant %s", got, wantPublished)
	}

	status, body, _ = st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/archive", id), nil)
	if status != 200 || body["data"].(map[string]any)["status"] != "archived" {
		t.Fatalf("archive: %d %v", status, body)
	}
	archivedAt := body["data"].(map[string]any)["archivedAt"]
	for _, path := range []string{"archive", "publish"} {
		if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/%s", id, path), nil); s != http.StatusConflict {
			t.Fatalf("%s an archived website: %d %v", path, s, b)
		}
	}
	eventually(t, 30*time.Second, "website.archived delivered", func() bool { return len(deliveredData(t, st, "/archived")) == 1 })
	wantArchived := fmt.Sprintf(`"data":{"websiteId":%d,"brandId":3,"slug":"spring-tour","archivedAt":%q}`, id, archivedAt)
	if got := deliveredData(t, st, "/archived")[0]; !strings.Contains(got, wantArchived) {
		t.Fatalf("website.archived body = %s\nwant %s", got, wantArchived)
	}
	// Deleting an archived website emits nothing more; deleting a draft emits website.archived.
	if s, b, _ := st.call(t, "B", "DELETE", fmt.Sprintf("/v2/svc/v2/websites/%d", id), nil); s != 200 {
		t.Fatalf("delete: %d %v", s, b)
	}
	draft := st.createWebsite(t, "draft-site")
	if s, b, _ := st.call(t, "B", "DELETE", fmt.Sprintf("/v2/svc/v2/websites/%d", draft), nil); s != 200 {
		t.Fatalf("delete draft: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "draft deletion announced", func() bool { return len(deliveredData(t, st, "/archived")) == 2 })
	n, err := st.db.NewSelect().Table("events").Where("event_type LIKE 'website.%'").Count(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("website events = %d, %v; want 3 (published, archived, deleted draft)", n, err)
	}
}

// TestScheduledPublishSurvivesWorkerRestart: a website scheduled 3 s ahead is published by the
// durable timer although the worker was stopped and restarted in between; a second website
// archived before its time is never published.
func TestScheduledPublishSurvivesWorkerRestart(t *testing.T) {
	besideOthers(t)
	st := newStack(t, stackOptions{allowPrivate: true})
	st.createWebhook(t, "B", st.rc.url("/scheduled"), "website.published")
	kept := st.createWebsite(t, "kept")
	dropped := st.createWebsite(t, "dropped")
	at := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	for _, id := range []int64{kept, dropped} {
		status, body, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", id), map[string]string{"scheduledAt": at})
		if status != http.StatusAccepted || body["data"].(map[string]any)["scheduledAt"] == nil {
			t.Fatalf("schedule: %d %v", status, body)
		}
	}
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/archive", dropped), nil); s != 200 {
		t.Fatalf("archive before the time: %d %v", s, b)
	}
	st.stopWorker()
	// The worker is down while the timer is due.
	eventually(t, 10*time.Second, "the scheduled time to pass", func() bool { return time.Now().After(mustParse(t, at).Add(time.Second)) })
	if n := len(deliveredData(t, st, "/scheduled")); n != 0 {
		t.Fatalf("%d website.published deliveries while no worker ran", n)
	}
	st.stopWorker = st.startWorker(t, st.box, st.policy, st.timeout, st.logger)

	eventually(t, 30*time.Second, "scheduled publication delivered", func() bool { return len(deliveredData(t, st, "/scheduled")) == 1 })
	if got := deliveredData(t, st, "/scheduled")[0]; !strings.Contains(got, fmt.Sprintf(`"websiteId":%d,`, kept)) || !strings.Contains(got, `"scheduledPublish":true`) {
		t.Fatalf("scheduled website.published = %s", got)
	}
	eventually(t, 30*time.Second, "the archived website's publication workflow canceled", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), workflows.WebsitePublishWorkflowID(dropped), "")
		return err == nil && desc.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_CANCELED
	})
	var w sources.Website
	if err := st.db.NewSelect().Model(&w).Where("id = ?", dropped).Scan(context.Background()); err != nil || w.Status != sources.WebsiteArchived {
		t.Fatalf("dropped website = %+v, %v", w, err)
	}
	if n := len(deliveredData(t, st, "/scheduled")); n != 1 {
		t.Fatalf("%d website.published deliveries, want 1 (the archived website must not publish)", n)
	}
}

func mustParse(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRescheduleAndPublishByHand: scheduling again replaces the timer (the later schedule
// publishes once, at its own time), and publishing by hand cancels a pending schedule.
func TestRescheduleAndPublishByHand(t *testing.T) {
	st := newStack(t, stackOptions{allowPrivate: true})
	st.createWebhook(t, "B", st.rc.url("/pub"), "website.published")
	moved := st.createWebsite(t, "moved")
	byHand := st.createWebsite(t, "by-hand")
	schedule := func(id int64, in time.Duration) {
		t.Helper()
		at := time.Now().Add(in).UTC().Format(time.RFC3339Nano)
		if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", id), map[string]string{"scheduledAt": at}); s != http.StatusAccepted {
			t.Fatalf("schedule: %d %v", s, b)
		}
	}
	schedule(moved, time.Hour)
	schedule(moved, 2*time.Second) // replaces the hour-long timer
	schedule(byHand, time.Hour)
	if s, b, _ := st.call(t, "B", "POST", fmt.Sprintf("/v2/svc/v2/websites/%d/publish", byHand), nil); s != 200 {
		t.Fatalf("publish by hand: %d %v", s, b)
	}
	eventually(t, 30*time.Second, "both published", func() bool { return len(deliveredData(t, st, "/pub")) == 2 })
	got := strings.Join(deliveredData(t, st, "/pub"), "\n")
	for _, want := range []string{fmt.Sprintf(`"websiteId":%d,`, moved), `"scheduledPublish":true`, fmt.Sprintf(`"websiteId":%d,`, byHand), `"scheduledPublish":false`} {
		if !strings.Contains(got, want) {
			t.Fatalf("deliveries lack %s:\n%s", want, got)
		}
	}
	eventually(t, 30*time.Second, "the hand-published website's timer canceled", func() bool {
		desc, err := st.tc.DescribeWorkflowExecution(context.Background(), workflows.WebsitePublishWorkflowID(byHand), "")
		return err == nil && desc.WorkflowExecutionInfo.Status == enums.WORKFLOW_EXECUTION_STATUS_CANCELED
	})
	n, err := st.db.NewSelect().Table("events").Where("event_type = 'website.published'").Count(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("website.published events = %d, %v; want 2", n, err)
	}
}
