//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/webhookd/webhookd/workflows"
)

// chromiumPath is the browser the Web UI test drives: Debian's chromium package, which `make test`
// installs when it is missing (deployments/dev/ensure-chromium.sh).
const chromiumPath = "/usr/bin/chromium"

// The Web UI test's page size, the size of the screenshots in docs/images.
const viewportWidth, viewportHeight = 1400, 920

// uiStepTimeout bounds each step in the browser: generous, since the Web UI polls its server and
// the machine may be busy with other tests.
const uiStepTimeout = time.Minute

// TestWebUIRetryFlow walks the operator flow of docs/operations.md ("Retrying a delivery from the
// Web UI, step by step") in headless Chromium, on the real `make run` stack: one event goes to a
// receiver that answers 500 and to one that answers 200. In the Temporal Web UI it types the query
// DeliveryState = "exhausted" into the workflow list, which then shows the failing delivery and not
// the delivered one, opens that delivery, and sends it the `retry` signal from the UI's own "Send a
// Signal" dialog once the receiver is fixed. The workflow must turn Completed in the page, and the
// receiver must get the message it refused before.
//
// Screenshots of each step go to $WEBHOOKD_SCREENSHOTS when set (docs/images regenerates them,
// see docs/operations.md), else to a temporary directory.
func TestWebUIRetryFlow(t *testing.T) {
	besideOthers(t)
	rc := startReceiver(t)
	var fixed atomic.Bool
	rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/broken" && !fixed.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	stack := startDevStack(t, webhookdBinary(t), []string{
		"WEBHOOKD_RETRY_SCHEDULE=1s,1s", "WEBHOOKD_ALLOW_PRIVATE_TARGETS=true", "WEBHOOKD_EXTRA_CA_FILE=" + rc.caFile,
	})

	api := &apiCaller{key: stack.apiKey}
	broken := api.createWebhook(t, stack.apiURL, rc.url("/broken"))
	healthy := api.createWebhook(t, stack.apiURL, rc.url("/healthy"))
	eventID := publishCampaign(t, api, stack.apiURL, "webui", 2)
	waitDeliveryState(t, api, stack.apiURL, broken, eventID, "exhausted")
	waitDeliveryState(t, api, stack.apiURL, healthy, eventID, "delivered")
	refused := rc.requests("/broken")
	brokenID := workflows.DeliveryWorkflowID(eventID, broken)
	healthyID := workflows.DeliveryWorkflowID(eventID, healthy)

	b := startBrowser(t)
	list := stack.uiURL + "/namespaces/default/workflows"
	rowLink := func(id string) string {
		return visibleExpr("[data-testid=workflows-summary-configurable-table-row] a", id)
	}

	// 1. The workflow list, filtered with a query typed into the UI's own query input.
	b.do("open the workflow list", chromedp.Navigate(list))
	b.waitFor("both deliveries in the unfiltered list", "!!("+rowLink(brokenID)+") && !!("+rowLink(healthyID)+")",
		chromedp.Reload())
	const query = `DeliveryState = "exhausted"`
	b.do("type the query",
		chromedp.Click(visible("[data-testid=toggle-manual-query]", ""), chromedp.NodeVisible),
		chromedp.SendKeys(visible("[data-testid=manual-search-input]", ""), query+"\n", chromedp.NodeVisible))
	// The exhausted state reaches Temporal's visibility store just after the database: Search runs
	// the typed query again until it shows.
	b.waitFor("the exhausted delivery, and only it, in the filtered list", "!!("+rowLink(brokenID)+") && !("+rowLink(healthyID)+")",
		chromedp.Click(visible("button", "Search"), chromedp.NodeVisible))
	at := b.location()
	if u, err := url.Parse(at); err != nil || u.Query().Get("query") != query {
		t.Fatalf("the list at %s does not run the typed query %q", at, query)
	}
	// The mouse still rests on the query toggle, whose tooltip would hide part of the screenshot.
	b.do("move the mouse away", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, viewportWidth-10, viewportHeight-10))
	b.screenshot("webui-1-exhausted-filter.png")

	// 2. The delivery, opened from the list: it waits, Running, for a retry.
	b.do("open the delivery",
		chromedp.Click(chromedp.JSPath(rowLink(brokenID)), chromedp.NodeVisible),
		chromedp.WaitVisible(visible("[data-testid=workflow-id-heading]", brokenID)),
		chromedp.WaitVisible(visible("[data-testid=event-summary-row]", "")))
	if status := b.workflowStatus(); status != "Running" {
		t.Fatalf("the exhausted delivery shows as %q, want Running (waiting for a retry signal)", status)
	}
	b.screenshot("webui-2-delivery.png")

	// 3. More Actions, Send a Signal: the dialog offers the workflow's signals; `retry` takes no input.
	const dialog = "dialog#signal-confirmation-modal[open]"
	b.do("open the Send a Signal dialog",
		chromedp.Click(visible("button[aria-controls=workflow-actions]", "More Actions"), chromedp.NodeVisible),
		chromedp.WaitVisible(visible("button[aria-controls=workflow-actions][aria-expanded=true]", "")),
		chromedp.Click(visible("[data-testid=signal-button]", "Send a Signal"), chromedp.NodeVisible),
		chromedp.WaitVisible(visible(dialog, "")),
		chromedp.Click(visible(dialog+" [data-testid=signal-select-button]", ""), chromedp.NodeVisible),
		chromedp.Click(visible(dialog+" li[role=option]", workflows.SignalRetry), chromedp.NodeVisible))
	if name := b.eval("choose the signal", `document.querySelector("`+dialog+` [data-testid=signal-select]").value`); name != workflows.SignalRetry {
		t.Fatalf("the dialog's signal name is %q, want %q", name, workflows.SignalRetry)
	}
	// Submit fades in once a signal is chosen; the screenshot shows it ready.
	submit := visibleExpr(dialog+" [data-testid=confirm-modal-button]", "Submit")
	b.waitFor("Submit enabled", "(e => !!e && !e.disabled && getComputedStyle(e).opacity === \"1\")("+submit+")", nil)
	b.screenshot("webui-3-signal-dialog.png")
	// The receiver is fixed before the signal goes, as an operator would: the retry runs the whole
	// schedule at once, and a fix that came later than its last attempt would find it exhausted again.
	fixed.Store(true)
	b.do("send the signal",
		chromedp.Click(chromedp.JSPath(submit), chromedp.NodeVisible),
		chromedp.WaitNotPresent(chromedp.JSPath(`document.querySelector("`+dialog+`")`)))

	// 4. The delivery ends Completed: the page updates itself, or a reload shows it.
	b.waitFor("the delivery Completed", "("+workflowStatusExpr+`) === "Completed"`,
		chromedp.Reload())
	b.do("wait for the history", chromedp.WaitVisible(visible("[data-testid=event-summary-row]", "")))
	b.screenshot("webui-4-delivered.png")

	arrived := rc.requests("/broken")
	if len(arrived) <= len(refused) {
		t.Fatalf("the receiver got %d requests, all before the retry", len(arrived))
	}
	last := arrived[len(arrived)-1]
	if id := last.Header.Get("Webhook-Id"); id == "" || id != refused[0].Header.Get("Webhook-Id") {
		t.Errorf("the retried message has webhook-id %q, the refused one %q", id, refused[0].Header.Get("Webhook-Id"))
	}
	if !strings.Contains(string(last.Body), `"webui"`) {
		t.Errorf("the retried message is not the event published: %s", last.Body)
	}
	waitDeliveryState(t, api, stack.apiURL, broken, eventID, "delivered")
}

// publishCampaign publishes one campaign.created event named name and checks it matched the
// number of webhooks expected.
func publishCampaign(t *testing.T, api *apiCaller, apiURL, name string, matched int) int64 {
	t.Helper()
	data := map[string]any{"id": 1, "name": name, "platform": "meta", "status": "active",
		"startDate": "2026-03-01T00:00:00.000Z", "endDate": "2026-03-31T23:59:59.999Z", "budget": 10}
	status, body, err := api.call(t.Context(), "POST", apiURL+"/api/svc/v2/events", map[string]any{"eventType": "campaign.created", "data": data})
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("publish: %d %v %v", status, body, err)
	}
	d := body["data"].(map[string]any)
	if got := int(d["matched"].(float64)); got != matched {
		t.Fatalf("the event matched %d webhooks, want %d", got, matched)
	}
	return int64(d["id"].(float64))
}

// waitDeliveryState polls a webhook's delivery log until the event's delivery is in state.
func waitDeliveryState(t *testing.T, api *apiCaller, apiURL string, webhookID, eventID int64, state string) {
	t.Helper()
	path := fmt.Sprintf("%s/api/svc/v2/webhooks/%d/deliveries", apiURL, webhookID)
	deadline := time.Now().Add(time.Minute)
	last := "no delivery"
	for {
		status, body, err := api.call(t.Context(), "GET", path, nil)
		if err != nil || status != http.StatusOK {
			last = fmt.Sprintf("%d %v %v", status, body, err)
		} else {
			for _, d := range body["data"].([]any) {
				if d := d.(map[string]any); int64(d["eventId"].(float64)) == eventID {
					last = fmt.Sprint(d["state"])
				}
			}
		}
		if last == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery of event %d to webhook %d is %s after a minute, want %s", eventID, webhookID, last, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// browser is one tab of headless Chromium. Each step runs within uiStepTimeout; a step that fails
// saves a screenshot and the page's text and ends the test.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go
	fails string // where a failure's screenshot and page text go; kept when the test fails
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", "new"), chromedp.DisableGPU, chromedp.WindowSize(viewportWidth, viewportHeight),
		// The tests run as root in containers, where Chromium's sandbox cannot start.
		chromedp.NoSandbox)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})

	shots := os.Getenv("WEBHOOKD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	fails, err := os.MkdirTemp("", "webhookd-webui-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(fails)
		}
	})
	// The first call starts Chromium and ties its life to the context it gets: the tab's own, not
	// a step's, whose timeout would close the browser.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	b := &browser{t: t, ctx: ctx, shots: shots, fails: fails}
	b.do("set the viewport", chromedp.EmulateViewport(viewportWidth, viewportHeight))
	return b
}

// do runs a step's actions in order.
func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatal(step, err)
	}
}

// eval returns the string a JavaScript expression gives.
func (b *browser) eval(step, expression string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expression))
	if err != nil {
		b.fatal(step, err)
	}
	return v
}

// waitFor polls until a JavaScript condition holds in the page. While it is false, again (if
// not nil) runs every few seconds: a Reload, or the UI's own search.
func (b *browser) waitFor(step, condition string, again chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	const againEvery = 10 * time.Second
	deadline := time.Now().Add(uiStepTimeout)
	lastTry := time.Now()
	for {
		ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
		// An error (the page between two documents) is one more look that failed.
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](condition))
		cancel()
		switch {
		case ok && err == nil:
			return
		case time.Now().After(deadline):
			b.fatal(step, fmt.Errorf("not so after %s (last look: %v)", uiStepTimeout, err))
		case again != nil && time.Since(lastTry) > againEvery:
			b.do(step, again)
			lastTry = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (b *browser) location() string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	at, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.fatal("read the location", err)
	}
	return at
}

// workflowStatusExpr is the status a workflow's page shows in its header (Running, Completed, ...).
const workflowStatusExpr = `(() => {
	const h = [...document.querySelectorAll("header")].find(h => h.querySelector("[data-testid=workflow-id-heading]"));
	return h ? h.innerText.trim().split("\n")[0].trim() : "";
})()`

func (b *browser) workflowStatus() string {
	b.t.Helper()
	return b.eval("read the workflow's status", workflowStatusExpr)
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fatal("screenshot "+name, err)
	}
	path := filepath.Join(b.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// fatal ends the test at a failed step, with what the page showed: its address and text in the
// log, a screenshot and the text in b.fails.
func (b *browser) fatal(step string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	var saved []string
	if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
		saved = append(saved, fmt.Sprintf("no screenshot: %v", err))
	} else {
		saved = append(saved, b.save("failure.png", png))
	}
	at, err1 := chromedp.Run(ctx, chromedp.Location())
	text, err2 := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	if err1 != nil || err2 != nil {
		text = fmt.Sprintf("(page unreadable: %v %v)", err1, err2)
	}
	saved = append(saved, b.save("failure.txt", []byte(text)))
	b.t.Fatalf("web UI, %s: %v\nat %s; %s\npage text (end):\n%s", step, err, at, strings.Join(saved, "; "), lastChars(text, 3000))
}

func (b *browser) save(name string, data []byte) string {
	path := filepath.Join(b.fails, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Sprintf("not saved %s: %v", name, err)
	}
	return "saved " + path
}

// visibleExpr is JavaScript for the first element matching css that is shown and has text as its
// text (any text when empty). The Web UI keeps hidden copies of its menus and dialogs for other
// screen sizes, so the first match of a selector is often one nobody sees.
func visibleExpr(css, text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].find(e =>
		e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}) && e.getBoundingClientRect().width > 0 &&
		(%q === "" || e.innerText.trim() === %q))`, css, text, text)
}

func visible(css, text string) chromedp.JSPath { return chromedp.JSPath(visibleExpr(css, text)) }

func lastChars(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
