//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPortalHostileInputs is what a curious or hostile person tries in the portal, in Chromium: a
// link opened a second time, another account's endpoint by its id, a form posted without its CSRF
// token, and markup in what they type and in an event's payload. Each is refused or shown as text, and nothing they typed runs.
func TestPortalHostileInputs(t *testing.T) {
	besideOthers(t)
	rc := startReceiver(t)
	stack := startDevStack(t, webhookdBinary(t), []string{"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true", "WEBHOOKD_EXTRA_CA_FILE=" + rc.caFile})
	link := portalLink(t, stack)
	b := startBrowser(t)

	// 1. The link opens once; the second time it is refused, and the token is not in the address.
	b.do("open the portal link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.do("open the link again", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); !strings.Contains(got, "already opened") {
		t.Fatalf("a link opened twice shows:\n%s", got)
	}

	// 2. Markup in the URL it registers: shown as text on the endpoints page, never run.
	hostile := rc.url(`/hook/"><script>alert(1)</script><img src=x onerror=alert(2)>`)
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.do("register a URL with markup in it",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), hostile),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the endpoint created", `document.title.startsWith("Endpoint created")`, nil)
	b.do("back to the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("td.url a")))
	if got := b.text("read the URL", "td.url a"); !strings.Contains(got, "<script>alert(1)</script>") {
		t.Fatalf("the endpoint's URL shows as %q, want the markup as text", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the typed markup on the endpoints page", n)
	}

	// 2b. Markup in an event's payload (a fan's name): the event's page shows it as text.
	var lead map[string]any
	for _, it := range devAPI(t, stack, stack.apiKey, "GET", "/v2/svc/v2/event-types", nil)["data"].([]any) {
		if info := it.(map[string]any); info["type"] == "lead.captured" {
			lead = info["example"].(map[string]any)
		}
	}
	lead["name"] = `</pre><script>alert(3)</script><img src=x onerror=alert(4)>`
	ev := devAPI(t, stack, stack.apiKey, "POST", "/v2/svc/v2/events", map[string]any{"event": "lead.captured", "data": lead})
	eventID := int64(ev["data"].(map[string]any)["id"].(float64))
	b.do("open the event", chromedp.Navigate(fmt.Sprintf("%s/portal/events/%d", stack.apiURL, eventID)), chromedp.WaitVisible(chromedp.CSS("pre")))
	if got := b.text("read the payload", "pre"); !strings.Contains(got, "<script>alert(3)</script>") {
		t.Fatalf("the event's payload shows as %q, want the markup as text", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the payload's markup on the event's page", n)
	}
	b.screenshot("portal-hostile-payload.png")

	// 3. Another account's endpoint, by its id: not found, as an id that does not exist.
	other := createOtherAccountWebhook(t, stack, rc.url("/other"))
	b.do("open another account's endpoint", chromedp.Navigate(fmt.Sprintf("%s/portal/webhooks/%d", stack.apiURL, other)), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); !strings.Contains(got, "no such endpoint") || strings.Contains(got, rc.url("/other")) {
		t.Fatalf("another account's endpoint shows:\n%s", got)
	}

	// 4. A form posted without its CSRF token (the hidden field removed, as a forged form would
	// lack it): refused, and nothing changes.
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.eval("remove the form's token", `(document.querySelector('form.create input[name=csrf]').remove(), "removed")`)
	b.do("post the create form without its token",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), rc.url("/forged")),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the refusal", `document.title.startsWith("Form expired")`, nil)
	if got := b.text("read the page", "main"); !strings.Contains(got, "did not come from your portal session") {
		t.Fatalf("a form without its token shows:\n%s", got)
	}
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	if n := b.eval("count the forged endpoints", `[...document.querySelectorAll("td.url a")].filter(a => a.innerText.includes("/forged")).length + ""`); n != "0" {
		t.Fatalf("the forged form made %s endpoints", n)
	}
}

// createOtherAccountWebhook registers a webhook of another account (its own API key, made by the
// operator's CLI) and returns its id.
func createOtherAccountWebhook(t *testing.T, stack devStack, url string) int64 {
	t.Helper()
	addr := strings.TrimPrefix(stack.apiURL, "http://")
	cmd := exec.Command(webhookdBinary(t), "apikey", "create", "--owner-email", "someone-else@example.com")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATA_DIR="+stack.dataDir, "WEBHOOKD_HTTP_ADDR="+addr, "WEBHOOKD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhookd apikey create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	key := lines[len(lines)-1]
	body := devAPI(t, stack, key, "POST", "/v2/svc/v2/webhooks", map[string]any{"url": url, "eventType": "lead.captured"})
	return int64(body["data"].(map[string]any)["id"].(float64))
}
