// Package dbtest provides real databases for tests: a fresh migrated SQLite file, or a fresh migrated
// database of its own on a real PostgreSQL server. The server is the one WEBHOOKD_TEST_DATABASE_URL
// names, or else a throwaway cluster this package starts once per test process on a free loopback
// port and stops from Main.
//
// PostgreSQL belongs to the integration tier: built without the integration (or e2e) tag, Backends
// is SQLite alone and a test that asks for PostgreSQL fails, so that a plain `go test ./...` needs
// no PostgreSQL server binaries.
package dbtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// EnvDatabaseURL names an existing PostgreSQL server to use instead of a throwaway cluster. It must
// point at a database whose user may CREATE DATABASE, ALTER DATABASE and terminate backends.
const EnvDatabaseURL = "WEBHOOKD_TEST_DATABASE_URL"

// Backend is one database the store and handler tests run against.
type Backend struct {
	Name string
	Open func(t testing.TB) *model.DB
}

// ForEach runs fn, as a subtest named after the backend, on a fresh database of every backend of
// this run (Backends).
func ForEach(t *testing.T, fn func(t *testing.T, db *model.DB)) {
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) { fn(t, b.Open(t)) })
	}
}

// SQLite returns a fresh migrated SQLite database in a file under t.TempDir(), closed at cleanup.
func SQLite(t testing.TB) *model.DB {
	t.Helper()
	db, err := model.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "webhookd.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	closeAtCleanup(t, db)
	if err := model.Migrate(t.Context(), db.DB); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return db
}

// Postgres returns a fresh migrated PostgreSQL database of its own, closed and dropped at cleanup.
func Postgres(t testing.TB) *model.DB {
	t.Helper()
	dsn := PostgresURL(t)
	db, err := model.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	// Registered after PostgresURL's drop, so it runs first: the drop then has no pool to force out.
	closeAtCleanup(t, db)
	return db
}

// PostgresURL returns the URL of a fresh migrated database of its own, dropped at cleanup, for tests
// that hand a database to a subprocess.
func PostgresURL(t testing.TB) string {
	t.Helper()
	s := postgresServer(t)
	name := fmt.Sprintf("%s_%d", s.prefix, s.seq.Add(1))
	// Copying the migrated template costs a few milliseconds; migrating each database would cost far more.
	if _, err := s.admin.ExecContext(t.Context(), "CREATE DATABASE ? TEMPLATE ?", bun.Ident(name), bun.Ident(s.template)); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a subprocess or a leaked pool may still hold sessions.
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name)); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return s.urlFor(name)
}

// Outage makes the PostgreSQL database behind db unreachable, as if its server went away: new
// connections are refused and existing sessions are terminated. It returns a function that restores
// the database; restore also runs at cleanup, so a failing test does not leave the database shut.
func Outage(t testing.TB, db *model.DB) (restore func()) {
	t.Helper()
	if !model.IsPostgres(db) {
		t.Fatal("dbtest.Outage needs a PostgreSQL database")
	}
	s := postgresServer(t)
	var name string
	if err := db.NewRaw("SELECT current_database()").Scan(t.Context(), &name); err != nil {
		t.Fatalf("name of the database for the outage: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.admin.ExecContext(ctx, "ALTER DATABASE ? ALLOW_CONNECTIONS false", bun.Ident(name)); err != nil {
		t.Fatalf("refuse connections to %s: %v", name, err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.admin.ExecContext(ctx, "ALTER DATABASE ? ALLOW_CONNECTIONS true", bun.Ident(name)); err != nil {
				t.Errorf("allow connections to %s again: %v", name, err)
			}
		})
	}
	t.Cleanup(restore)
	// pg_terminate_backend only signals: wait until the sessions are gone, or a query issued right
	// after Outage returns could still succeed on a connection that has not died yet.
	for {
		var left int
		err := s.admin.NewRaw("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name).Scan(ctx, &left)
		if err != nil {
			t.Fatalf("terminate sessions of %s: %v", name, err)
		}
		if left == 0 {
			return restore
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sessions of %s still alive after terminating them: %v", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Main runs a package's tests, then the given cleanups (temporaltest.Stop, for a package that uses
// both helpers), then stops the throwaway PostgreSQL cluster if this process started one.
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
func Main(m interface{ Run() int }, cleanups ...func()) {
	code := m.Run()
	for _, cleanup := range cleanups {
		cleanup()
	}
	// Every test has returned, so the server, if any, is no longer in use.
	if shared.server != nil {
		if err := shared.server.close(); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		}
	}
	os.Exit(code)
}

func closeAtCleanup(t testing.TB, db *model.DB) {
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close database: %v", err)
		}
	})
}

// shared is the one PostgreSQL server of this test process.
var shared struct {
	once   sync.Once
	server *pgServer
	err    error
}

func postgresServer(t testing.TB) *pgServer {
	t.Helper()
	if !postgresTier {
		t.Fatal("PostgreSQL is for the integration tier: put this test behind //go:build integration (go test -tags integration runs it)")
	}
	shared.once.Do(func() { shared.server, shared.err = startPostgres() })
	if shared.err != nil {
		t.Fatalf("PostgreSQL for tests: %v", shared.err)
	}
	return shared.server
}

// pgServer is a PostgreSQL server with a migrated template database that test databases copy.
type pgServer struct {
	adminURL string
	admin    *model.DB
	// prefix names this process's databases. With a shared server several test processes create
	// databases at once, so it holds the pid and a random token (pids repeat across runs, and a
	// crashed run leaves its databases behind).
	prefix   string
	template string
	seq      atomic.Int64
	cluster  *cluster // nil when the server is the one EnvDatabaseURL names
}

func startPostgres() (*pgServer, error) {
	token := strings.ToLower(rand.Text()[:8])
	s := &pgServer{
		prefix:   fmt.Sprintf("webhookd_test_%d_%s", os.Getpid(), token),
		template: fmt.Sprintf("webhookd_tmpl_%d_%s", os.Getpid(), token),
		adminURL: os.Getenv(EnvDatabaseURL),
	}
	if s.adminURL == "" {
		c, adminURL, err := startCluster(false)
		if err != nil {
			return nil, err
		}
		s.cluster, s.adminURL = c, adminURL
	}
	if err := s.prepare(); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// prepare connects the admin pool and creates the migrated template.
func (s *pgServer) prepare() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := model.Open(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("admin connection: %w", err)
	}
	s.admin = admin
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE ?", bun.Ident(s.template)); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	tmpl, err := model.Open(ctx, s.urlFor(s.template))
	if err != nil {
		return fmt.Errorf("open template database: %w", err)
	}
	err = model.Migrate(ctx, tmpl.DB)
	// CREATE DATABASE .. TEMPLATE fails while anyone is connected to the template, so no pool may
	// stay open on it.
	if cerr := tmpl.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migrate template database: %w", err)
	}
	return nil
}

func (s *pgServer) urlFor(database string) string {
	u, err := url.Parse(s.adminURL)
	if err != nil {
		// model.Open already parsed this URL successfully, so this cannot happen.
		return s.adminURL
	}
	u.Path = "/" + database
	return u.String()
}

// close drops the template from a shared server (the test databases were dropped by their
// cleanups) and stops a throwaway cluster.
func (s *pgServer) close() error {
	var errs []error
	if s.admin != nil {
		if s.cluster == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(s.template))
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("drop template database: %w", err))
			}
		}
		if err := s.admin.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close admin connection: %w", err))
		}
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.stop())
	}
	return errors.Join(errs...)
}

// clusterDirPrefix names the temporary directories of throwaway clusters, so a later run can find
// the ones a killed test process left running.
const clusterDirPrefix = "webhookd-pg-"

// cluster is a throwaway PostgreSQL cluster in a temporary directory.
type cluster struct {
	dir   string
	bin   string
	runAs *user.User // the postgres user when this process is root, since initdb and postgres refuse root
	// durable keeps PostgreSQL's crash safety on (fsync, synchronous_commit, full_page_writes),
	// for a test that crashes the server.
	durable bool
	port    int
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

// startCluster runs initdb and pg_ctl in a fresh temporary directory and returns the cluster and
// its superuser URL. The server listens on a free loopback port and a socket in that directory
// only, so it never meets another cluster on the machine. durable keeps the crash safety that a
// shared throwaway cluster turns off for speed.
func startCluster(durable bool) (*cluster, string, error) {
	bin, err := findPostgresBin()
	if err != nil {
		return nil, "", err
	}
	var runAs *user.User
	if os.Geteuid() == 0 {
		if runAs, err = user.Lookup("postgres"); err != nil {
			return nil, "", fmt.Errorf("initdb refuses to run as root and there is no postgres user to run it as (run make test, which installs PostgreSQL): %w", err)
		}
	}
	reapOrphanClusters(bin, runAs)
	dir, err := os.MkdirTemp("", clusterDirPrefix)
	if err != nil {
		return nil, "", fmt.Errorf("cluster directory: %w", err)
	}
	c := &cluster{dir: dir, bin: bin, runAs: runAs, durable: durable}
	if err := c.init(); err != nil {
		return nil, "", errors.Join(err, os.RemoveAll(dir))
	}
	// The port is free when picked but another process may take it before postgres binds it, so a
	// failed start gets a new port.
	var startErr error
	for range 3 {
		var port int
		if port, startErr = freePort(); startErr != nil {
			break
		}
		if startErr = c.start(port); startErr == nil {
			return c, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), nil
		}
	}
	return nil, "", errors.Join(startErr, c.stop())
}

func (c *cluster) init() error {
	// The owner file lets reapOrphanClusters tell a live cluster from one whose test process died.
	if err := os.WriteFile(filepath.Join(c.dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("write cluster owner: %w", err)
	}
	if c.runAs != nil {
		uid, err := strconv.Atoi(c.runAs.Uid)
		if err != nil {
			return fmt.Errorf("uid of %s: %w", c.runAs.Username, err)
		}
		gid, err := strconv.Atoi(c.runAs.Gid)
		if err != nil {
			return fmt.Errorf("gid of %s: %w", c.runAs.Username, err)
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return fmt.Errorf("hand the cluster directory to %s: %w", c.runAs.Username, err)
		}
	}
	// --no-sync: the cluster dies with the test process, so durability buys nothing; a durable
	// cluster's files are synced once here, as any server's are.
	args := []string{"-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"}
	if !c.durable {
		args = append(args, "--no-sync")
	}
	if out, err := c.run("initdb", args...); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (c *cluster) start(port int) error {
	// fsync, synchronous_commit and full_page_writes off trade crash safety, which a throwaway
	// cluster does not need, for speed; a durable one keeps PostgreSQL's defaults, all on.
	// Parallel tests each hold a pool, hence max_connections.
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c max_connections=300", port, c.dir)
	if !c.durable {
		opts += " -F -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	c.port = port
	logFile := filepath.Join(c.dir, "postgres.log")
	// -w waits until the server accepts connections.
	out, err := c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.data(), "-l", logFile, "-o", opts)
	if err != nil {
		serverLog, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s\n%s", port, err, out, serverLog)
	}
	return nil
}

// Crashable is a PostgreSQL server of one test's own, durable as a production server runs
// (fsync, synchronous_commit and full_page_writes on), that the test kills with SIGKILL and starts
// again on the same data and port: a crash of the database server, after which PostgreSQL
// recovers from its write-ahead log.
type Crashable struct {
	// URL is the superuser's URL of its postgres database.
	URL string
	c   *cluster
}

// CrashablePostgres starts a Crashable server, stopped and removed at cleanup.
func CrashablePostgres(t testing.TB) *Crashable {
	t.Helper()
	c, u, err := startCluster(true)
	if err != nil {
		t.Fatalf("start a crashable PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Errorf("stop the crashable PostgreSQL: %v", err)
		}
	})
	return &Crashable{URL: u, c: c}
}

// Kill sends SIGKILL to the postmaster and waits until it is gone. Its backends notice and exit
// on their own, as after a real crash.
func (p *Crashable) Kill(t testing.TB) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(p.c.data(), "postmaster.pid"))
	if err != nil {
		t.Fatalf("the postmaster's pid: %v", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH); {
		if time.Now().After(deadline) {
			t.Fatalf("the postmaster %d outlived SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Start starts the server again on its data and port: PostgreSQL replays its write-ahead log. The
// killed server's backends may hold its shared memory for a moment, which refuses a start, so it
// is tried again for up to a minute.
func (p *Crashable) Start(t testing.TB) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = p.c.start(p.c.port); err == nil {
			return
		}
	}
	t.Fatalf("start PostgreSQL again after the kill: %v", err)
}

// stop shuts the cluster down and removes its directory.
func (c *cluster) stop() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(c.data(), "postmaster.pid")); err == nil {
		if out, err := c.run("pg_ctl", "stop", "-w", "-t", "60", "-D", c.data(), "-m", "fast"); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl stop: %w\n%s", err, out))
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
	}
	return errors.Join(errs...)
}

// run runs one of the PostgreSQL programs, as the postgres user when this process is root.
func (c *cluster) run(program string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, program)
	cmd := exec.Command(path, args...)
	if c.runAs != nil {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs.Username, "--", path}, args...)...)
	}
	// The test's working directory may be closed to the postgres user; initdb and postgres complain
	// when they cannot return to it.
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// reapOrphanClusters stops and removes the clusters of test processes that died without running
// Main (a test timeout, a kill), so they do not pile up on a developer's machine. It is best effort.
func reapOrphanClusters(bin string, runAs *user.User) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), clusterDirPrefix+"*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err != nil {
			continue // still being created, or not ours
		}
		pid, err := strconv.Atoi(string(owner))
		if err != nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		c := &cluster{dir: dir, bin: bin, runAs: runAs}
		if _, err := os.Stat(filepath.Join(c.data(), "postmaster.pid")); err == nil {
			_, _ = c.run("pg_ctl", "stop", "-w", "-D", c.data(), "-m", "immediate")
		}
		_ = os.RemoveAll(dir)
	}
}

// findPostgresBin returns the directory holding initdb and pg_ctl: from PATH, else the newest
// Debian-style /usr/lib/postgresql/<version>/bin.
func findPostgresBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// Debian's /usr/local/bin or /usr/bin entries are symlinks; pg_ctl sits beside the real file.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin: run make test, which installs them, or set " + EnvDatabaseURL)
}

func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
