// Package temporaltest runs a real Temporal dev server for integration tests: the SDK's
// testsuite.StartDevServer on the pinned `temporal` CLI from the module's bin/ directory, started
// once per test process with webhookd's search attributes registered and its dynamic config
// (DynamicConfigFile), in memory, on a free loopback port.
//
// The dev server belongs to the integration tier: built without the integration tag (or e2e, or
// record), Start fails, so that a plain `go test ./...` needs no Temporal CLI. Workflow tests in
// that run use the SDK's testsuite instead.
package temporaltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/repo"
	"github.com/webhookd/webhookd/workflows"
)

const (
	// EnvAddress names a running Temporal server (host:port) to use instead of starting one. It
	// must have workflows.SearchAttributes registered in its default namespace.
	EnvAddress = "TEMPORAL_ADDRESS_TEST"
	// EnvCLI overrides the path of the temporal CLI binary.
	EnvCLI = "TEMPORAL_CLI"

	namespace    = "default"
	startTimeout = 60 * time.Second
)

// Server is a running Temporal server.
type Server struct {
	Address   string
	Namespace string

	dev     *testsuite.DevServer // nil when the server is the one EnvAddress names
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
	if !serverTier {
		t.Fatal("the Temporal dev server is for the integration tier: put this test behind //go:build integration (go test -tags integration runs it), or use the SDK's testsuite")
	}
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

// Client returns a client of the server's namespace, closed at cleanup. Its interceptors that are
// also worker interceptors apply to the workers made with it.
func (s *Server) Client(t testing.TB, interceptors ...interceptor.ClientInterceptor) client.Client {
	t.Helper()
	o := s.options(slog.LevelWarn, os.Stderr)
	o.Interceptors = interceptors
	c, err := client.DialContext(t.Context(), o)
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
		if err := s.waitSearchAttributes(); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvAddress, addr, err)
		}
		return s, nil
	}
	bin, err := CLIPath()
	if err != nil {
		return nil, err
	}
	dynamicConfig, err := dynamicConfigFlags()
	if err != nil {
		return nil, err
	}
	// StartDevServer picks a free port, but another process may take it before the server binds
	// it: a start that fails gets another port.
	for attempt := 1; ; attempt++ {
		s, err := launch(bin, dynamicConfig)
		if err == nil || attempt == 3 {
			return s, err
		}
	}
}

func launch(bin string, dynamicConfig []string) (*Server, error) {
	logFile, err := os.CreateTemp("", "webhookd-temporal-*.log")
	if err != nil {
		return nil, fmt.Errorf("dev server log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	s := &Server{Namespace: namespace, logPath: logFile.Name()}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s.dev, err = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:     bin,
		ClientOptions:    &client.Options{Namespace: namespace, Logger: log.NewStructuredLogger(quiet)},
		LogLevel:         "error",
		SearchAttributes: SearchAttributes(),
		ExtraArgs:        dynamicConfig,
		Stdout:           logFile,
		Stderr:           logFile,
	})
	if err != nil {
		out, _ := os.ReadFile(s.logPath)
		_ = os.Remove(s.logPath)
		return nil, fmt.Errorf("start %s: %w\n%s", bin, err, out)
	}
	s.dev.Client().Close() // tests dial their own clients
	s.Address = s.dev.FrontendHostPort()
	if err := s.waitSearchAttributes(); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// SearchAttributes gives workflows.SearchAttributes to the dev server, which takes them as values:
// it registers each key with its type.
func SearchAttributes() temporal.SearchAttributes {
	var updates []temporal.SearchAttributeUpdate
	for _, key := range workflows.SearchAttributes {
		switch key := key.(type) {
		case temporal.SearchAttributeKeyInt64:
			updates = append(updates, key.ValueSet(0))
		case temporal.SearchAttributeKeyKeyword:
			updates = append(updates, key.ValueSet(""))
		default:
			panic(fmt.Sprintf("temporaltest: search attribute %s has a type to add here", key.GetName()))
		}
	}
	return temporal.NewSearchAttributes(updates...)
}

// waitSearchAttributes polls until the namespace has the search attributes, which the dev server
// registers only after its frontend is up.
func (s *Server) waitSearchAttributes() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, s.options(slog.LevelError, io.Discard))
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	for {
		err := dispatch.CheckSearchAttributes(ctx, c, s.Namespace)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", startTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends a server this process started and removes its log.
func (s *Server) stop() error {
	if s.dev == nil {
		return nil
	}
	var err error
	if serr := s.dev.Stop(); serr != nil {
		err = fmt.Errorf("stop dev server: %w", serr)
	}
	if rerr := os.Remove(s.logPath); rerr != nil {
		err = errors.Join(err, fmt.Errorf("remove dev server log: %w", rerr))
	}
	return err
}

// CLIPath finds the temporal CLI: EnvCLI, else bin/temporal at the module root, which make installs.
func CLIPath() (string, error) {
	if p := os.Getenv(EnvCLI); p != "" {
		return p, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", fmt.Errorf("%w to find bin/temporal in: run make test (it installs bin/temporal), or set %s", err, EnvCLI)
	}
	p := filepath.Join(root, "bin", "temporal")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no Temporal CLI at %s: run make test (it installs bin/temporal): %w", p, err)
	}
	return p, nil
}
