//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkBannerPortalLink opens the "Owner's portal:" link of make run's banner: it answers 303 to
// /portal/ with a session cookie that opens the endpoints page, and a second visit is refused.
func checkBannerPortalLink(t *testing.T, banner string) {
	t.Helper()
	var link string
	for line := range strings.Lines(banner) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Owner's portal:"); ok {
			link = strings.TrimSpace(rest)
		}
	}
	if !strings.Contains(link, "/portal/enter?token=wpt_") {
		t.Fatalf("no portal link in the banner:\n%s", banner)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/portal/" || len(res.Cookies()) != 1 {
		t.Fatalf("opening %s: %d, Location %q, cookies %v", link, res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	u.Path, u.RawQuery = "/portal/", ""
	page := u.String()
	req, _ := http.NewRequest("GET", page, nil)
	req.AddCookie(res.Cookies()[0])
	if res, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "Endpoints") {
		t.Fatalf("GET %s with the session: %d\n%s", page, res.StatusCode, body)
	}
	if res, err = client.Get(link); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("opening the link again: %d, want 403", res.StatusCode)
	}
}

// TestMakeRunStopsQuietlyOnCtrlC runs the `make run` script (deployments/dev/run.sh) on free
// ports, presses Ctrl-C (SIGINT to its process group, as a terminal does), and checks that
// everything stops with status 130 and without the message meant for a process that died on its
// own.
func TestMakeRunStopsQuietlyOnCtrlC(t *testing.T) {
	bin := webhookdBinary(t)
	script, err := filepath.Abs(filepath.Join("..", "deployments", "dev", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, uiPort, _ := strings.Cut(freeAddr(t), ":")
	out := &syncBuffer{}
	data := t.TempDir()
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "WEBHOOKD_BIN="+bin, "WEBHOOKD_DATA_DIR="+data,
		"WEBHOOKD_HTTP_ADDR="+freeAddr(t), "TEMPORAL_ADDRESS="+freeAddr(t), "TEMPORAL_UI_PORT="+uiPort)
	cmd.Stdout, cmd.Stderr = out, out
	sc := startScript(t, cmd, time.Minute)

	deadline := time.After(120 * time.Second)
	for !strings.Contains(out.String(), "webhookd is up") {
		select {
		case <-sc.exited:
			t.Fatalf("run.sh ended before the stack was up (%v):\n%s", sc.err, out)
		case <-deadline:
			t.Fatalf("the stack was not up after 2 minutes:\n%s", out)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The banner's portal link opens the portal once (issue 20).
	for !strings.Contains(out.String(), "Ctrl-C stops everything") {
		select {
		case <-sc.exited:
			t.Fatalf("run.sh ended before its banner was printed (%v):\n%s", sc.err, out)
		case <-deadline:
			t.Fatalf("no banner after 2 minutes:\n%s", out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	checkBannerPortalLink(t, out.String())
	// The dev server's visibility table was trimmed before webhookd started (cmd/devtemporal).
	log, err := os.ReadFile(filepath.Join(data, "temporal.log"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`devtemporal: .*: dropped (\d+) visibility indexes`).FindSubmatch(log); m == nil {
		t.Errorf("the dev server's visibility table was not trimmed:\n%s", log)
	} else if n, _ := strconv.Atoi(string(m[1])); n < 30 {
		t.Errorf("the dev server's visibility table was trimmed of %d indexes, want 30 or more", n)
	}
	sc.stop()
	err = sc.err
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("run.sh after Ctrl-C: %v, want exit status 130", err)
	}
	if text := out.String(); strings.Contains(text, "a process exited") || !strings.Contains(text, "stopping...") {
		t.Errorf("run.sh output after Ctrl-C:\n%s", text)
	}
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Errorf("processes of the stack are still running after Ctrl-C")
	}
}
