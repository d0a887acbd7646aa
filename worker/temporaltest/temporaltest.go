// Package temporaltest runs a real Temporal dev server for integration tests: the pinned `temporal`
// CLI from the module's bin/ directory, started once per test process with webhookd's search
// attributes registered, in memory, on free loopback ports.
package temporaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

const (
	// EnvAddress names a running Temporal server (host:port) to use instead of starting one. It
	// must have the SearchAttributes registered in its default namespace.
	EnvAddress = "TEMPORAL_ADDRESS_TEST"
	// EnvCLI overrides the path of the temporal CLI binary.
	EnvCLI = "TEMPORAL_CLI"

	namespace    = "default"
	startTimeout = 30 * time.Second
)

// SearchAttributes are the custom search attributes webhookd's workflows set, registered on the
// dev server at start.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	"WebhookId":     enumspb.INDEXED_VALUE_TYPE_INT,
	"EventType":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"Variant":       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"DeliveryState": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// DynamicConfig is the server configuration webhookd relies on, as dev server flags: fairness
// dispatches each task queue round-robin across accounts (workflows.FairnessKey), so one account's
// backlog does not queue ahead of another's. A production cluster sets the same key in its
// dynamic config (docs/operations.md).
var DynamicConfig = []string{"--dynamic-config-value", "matching.enableFairness=true"}

// Server is a running Temporal server.
type Server struct {
	Address   string
	Namespace string

	cmd     *exec.Cmd     // nil when the server is the one EnvAddress names
	exited  chan struct{} // closed when cmd has exited
	logPath string
}

// shared is the one server of this test process.
var shared struct {
	once   sync.Once
	server *Server
	err    error
}

// Start starts the dev server on first use and returns it; later calls, from any test of the
// process, reuse it. With EnvAddress set it uses that server instead.
func Start(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.server, shared.err = start() })
	if shared.err != nil {
		t.Fatalf("Temporal server for tests: %v", shared.err)
	}
	return shared.server
}

// Main runs a package's tests, then stops the dev server if this process started one.
//
//	func TestMain(m *testing.M) { temporaltest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the dev server if this process started one. It is for a TestMain that needs other
// cleanups too, such as dbtest.Main(m, temporaltest.Stop).
func Stop() {
	// Every test has returned, so nothing uses the server any more.
	if s := shared.server; s != nil {
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "temporaltest: %v\n", err)
		}
	}
}

// Client returns a client of the server's namespace, closed at cleanup.
func (s *Server) Client(t testing.TB) client.Client {
	t.Helper()
	c, err := client.DialContext(t.Context(), s.options(slog.LevelWarn, os.Stderr))
	if err != nil {
		t.Fatalf("dial Temporal at %s: %v", s.Address, err)
	}
	t.Cleanup(c.Close)
	return c
}

func (s *Server) options(level slog.Level, w io.Writer) client.Options {
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	return client.Options{HostPort: s.Address, Namespace: s.Namespace, Logger: log.NewStructuredLogger(logger)}
}

func start() (*Server, error) {
	if addr := os.Getenv(EnvAddress); addr != "" {
		s := &Server{Address: addr, Namespace: namespace}
		if err := s.waitReady(); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvAddress, addr, err)
		}
		return s, nil
	}
	bin, err := cliPath()
	if err != nil {
		return nil, err
	}
	// The ports are free when picked but another process may take one before the server binds it;
	// a server that exits during start gets new ports.
	for attempt := 1; ; attempt++ {
		s, err := launch(bin)
		if err == nil || attempt == 3 || !errors.Is(err, errExited) {
			return s, err
		}
	}
}

var errExited = errors.New("dev server exited during start")

func launch(bin string) (*Server, error) {
	var ports [4]int
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	logFile, err := os.CreateTemp("", "webhookd-temporal-*.log")
	if err != nil {
		return nil, fmt.Errorf("dev server log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	s := &Server{
		Address:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Namespace: namespace,
		exited:    make(chan struct{}),
		logPath:   logFile.Name(),
	}
	args := []string{"server", "start-dev", "--headless",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]),
		"--http-port", strconv.Itoa(ports[1]),
		"--metrics-port", strconv.Itoa(ports[2]),
		"--ui-port", strconv.Itoa(ports[3]),
		"--log-level", "error",
		"--namespace", namespace,
	}
	args = append(args, DynamicConfig...)
	for _, name := range slices.Sorted(maps.Keys(SearchAttributes)) {
		// The enum's String is the PascalCase name the CLI takes: Int, Keyword.
		args = append(args, "--search-attribute", name+"="+SearchAttributes[name].String())
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Its own process group, so stop can signal everything it spawned; and killed with this
	// process, so a test binary that dies on a timeout does not leave a server behind.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		_ = os.Remove(s.logPath)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait() // the exit status of a server we stop says nothing
		close(s.exited)
	}()
	if err := s.waitReady(); err != nil {
		out, _ := os.ReadFile(s.logPath)
		return nil, errors.Join(fmt.Errorf("%w\n%s", err, out), s.stop())
	}
	return s, nil
}

// waitReady polls until the server answers health checks and has the search attributes, which the
// dev server registers only after its frontend is up.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		if lastErr = s.ready(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-s.exited: // nil for a server we did not start, so it never fires
			return fmt.Errorf("%w: %v", errExited, s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", startTimeout, lastErr)
		case <-tick.C:
		}
	}
}

func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Connection errors during start are expected; they are reported through the returned error.
	c, err := client.DialContext(ctx, s.options(slog.LevelError, io.Discard))
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	for name, typ := range SearchAttributes {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			return fmt.Errorf("search attribute %s is %v, want %v", name, got, typ)
		}
	}
	return nil
}

// stop ends a server this process started and removes its log.
func (s *Server) stop() error {
	if s.cmd == nil {
		return nil
	}
	pgid := s.cmd.Process.Pid
	var err error
	if serr := syscall.Kill(-pgid, syscall.SIGTERM); serr != nil && !errors.Is(serr, syscall.ESRCH) {
		err = fmt.Errorf("stop dev server: %w", serr)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		if kerr := syscall.Kill(-pgid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			err = errors.Join(err, fmt.Errorf("kill dev server: %w", kerr))
		}
		<-s.exited
	}
	if rerr := os.Remove(s.logPath); rerr != nil {
		err = errors.Join(err, fmt.Errorf("remove dev server log: %w", rerr))
	}
	return err
}

// cliPath finds the temporal CLI: EnvCLI, else bin/temporal at the module root, which make installs.
func cliPath() (string, error) {
	if p := os.Getenv(EnvCLI); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "temporal")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("no Temporal CLI at %s: run make test (it installs bin/temporal): %w", p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory to find bin/temporal in: run make test (it installs bin/temporal), or set " + EnvCLI)
		}
		dir = parent
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
