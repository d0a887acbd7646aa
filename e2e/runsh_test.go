//go:build e2e

package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "WEBHOOKD_BIN="+bin, "WEBHOOKD_DATA_DIR="+t.TempDir(),
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
