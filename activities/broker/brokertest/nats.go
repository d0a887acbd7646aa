package brokertest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/webhookd/webhookd/internal/repo"
)

// NATSServerBin, relative to the module root, is the nats-server that `make bin/nats-server`
// builds from its Go module; EnvNATSServer names another.
const (
	NATSServerBin = "bin/nats-server"
	EnvNATSServer = "NATS_SERVER"
)

// The stream a NATS broker of the tests has, and the subject a destination publishes to.
const (
	NATSStream  = "WEBHOOKS"
	NATSSubject = "webhooks.deliveries"
	// natsAdmin is the user the helper itself connects as when the server requires users.
	natsAdmin        = "brokertest-admin"
	natsReadyTimeout = 30 * time.Second
	natsStopTimeout  = 10 * time.Second
	natsConsumer     = "brokertest"
	// NATSMaxPayload is the largest message the server takes.
	NATSMaxPayload    = 8 << 20
	natsDuplicateSpan = 2 * time.Minute
)

// NATSUser is a user of a NATS server with users: its password, and subjects it may not publish to.
type NATSUser struct {
	Name        string
	Password    string
	DenyPublish []string
}

// NATSOption changes the server StartNATS starts.
type NATSOption func(*NATS)

// WithNATSUsers makes the server require a user and password: users, and the helper's own.
func WithNATSUsers(users ...NATSUser) NATSOption {
	return func(n *NATS) { n.users = append(n.users, users...) }
}

// WithNATSToken makes the server require the token (and no user), which the helper uses too.
func WithNATSToken(token string) NATSOption {
	return func(n *NATS) { n.token = token }
}

// WithNATSTLS makes the server speak TLS only, with the certificate and key given (PEM), which
// roots verify: its URL is tls://.
func WithNATSTLS(certPEM, keyPEM string, roots *x509.CertPool) NATSOption {
	return func(n *NATS) { n.tlsCert, n.tlsKey, n.tlsRoots = certPEM, keyPEM, roots }
}

// WithNATSClientCA makes a TLS server (WithNATSTLS) require a client certificate that the CA
// (PEM) signed.
// The helper connects with helperCert, which the CA signed.
func WithNATSClientCA(caPEM string, helperCert tls.Certificate) NATSOption {
	return func(n *NATS) { n.clientCA, n.clientCert = caPEM, &helperCert }
}

// NATS is a nats-server with JetStream, run as a process on a loopback port with its store in a
// temporary directory, and NATSStream storing NATSSubject (file storage, a duplicate window of two
// minutes).
type NATS struct {
	bin       string
	dir       string // the store and the config file
	port      int
	users     []NATSUser
	adminPass string
	cmd       *exec.Cmd
	exited    chan struct{}
	logPath   string

	tlsCert, tlsKey string
	tlsRoots        *x509.CertPool
	clientCA        string
	token           string
	clientCert      *tls.Certificate // the helper's own, when clientCA is set
}

// StartNATS starts a nats-server for t, creates the stream, and stops the server at t's cleanup.
func StartNATS(t testing.TB, opts ...NATSOption) *NATS {
	t.Helper()
	bin, err := natsServerPath()
	if err != nil {
		t.Fatal(err)
	}
	n := &NATS{bin: bin, dir: t.TempDir(), adminPass: "admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	for _, o := range opts {
		o(n)
	}
	t.Cleanup(n.stop)
	// A free port may be taken by another process before the server binds it: try another.
	for attempt := 1; ; attempt++ {
		n.port, err = natsFreePort()
		if err == nil {
			err = n.start()
		}
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("nats-server: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), natsReadyTimeout)
	defer cancel()
	nc, js := n.connect(t)
	defer nc.Close()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       NATSStream,
		Subjects:   []string{NATSSubject},
		Storage:    jetstream.FileStorage,
		Duplicates: natsDuplicateSpan,
	})
	if err != nil {
		t.Fatalf("nats-server: create stream %s: %v", NATSStream, err)
	}
	return n
}

// URL is the server's URL as a webhook stores it.
func (n *NATS) URL() string {
	if n.tlsCert != "" {
		return "tls://" + n.Addr()
	}
	return "nats://" + n.Addr()
}

// Addr is the server's host:port.
func (n *NATS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Subject is the subject NATSStream stores.
func (n *NATS) Subject() string { return NATSSubject }

// Kill kills the server with SIGKILL and waits until it is gone; its store stays.
func (n *NATS) Kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL) // it may have exited on its own: Wait tells
	<-n.exited
	n.cmd = nil
}

// Pause stops the server with SIGSTOP: it keeps its connections and answers nothing, as a hung
// broker does, until Resume.
func (n *NATS) Pause(t testing.TB) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause nats-server: %v", err)
	}
	n.waitState(t, true)
}

// Resume continues the server Pause stopped.
func (n *NATS) Resume(t testing.TB) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume nats-server: %v", err)
	}
	n.waitState(t, false)
}

// waitState waits until the kernel shows the server stopped (state T in /proc/<pid>/stat), or
// not: a signal is delivered when the process next runs, not when kill returns.
func (n *NATS) waitState(t testing.TB, stopped bool) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid)
	for deadline := time.Now().Add(natsReadyTimeout); ; {
		out, err := os.ReadFile(stat)
		if err != nil {
			t.Fatalf("nats-server: %v", err)
		}
		// The state follows the command's name in parentheses, which may hold spaces.
		fields := strings.Fields(string(out[bytes.LastIndexByte(out, ')')+1:]))
		if len(fields) > 0 && (fields[0] == "T") == stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server: state %v in %s, want stopped %v", fields[:1], stat, stopped)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the server again on the same port with the same store, after Kill, and waits
// until the stream is back.
func (n *NATS) Restart(t testing.TB) {
	t.Helper()
	if n.cmd != nil {
		n.Kill()
	}
	if err := n.start(); err != nil {
		t.Fatalf("nats-server restart: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), natsReadyTimeout)
	defer cancel()
	nc, js := n.connect(t)
	defer nc.Close()
	for {
		_, err := js.Stream(ctx, NATSStream)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("nats-server restart: stream %s not back: %v", NATSStream, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CreateStream creates another stream on the server, such as a small one that refuses what
// overflows it (jetstream.DiscardNew).
func (n *NATS) CreateStream(t testing.TB, cfg jetstream.StreamConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), natsReadyTimeout)
	defer cancel()
	nc, js := n.connect(t)
	defer nc.Close()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("nats-server: create stream %s: %v", cfg.Name, err)
	}
}

// Poll is Consume: it never fails the test for what did not come.
func (n *NATS) Poll(t testing.TB, count int, timeout time.Duration) []Received {
	t.Helper()
	return n.Consume(t, count, timeout)
}

// Consume reads up to n messages from the stream, in order, each once across calls (a durable
// consumer acknowledges them), waiting at most timeout for them; it returns what arrived.
func (n *NATS) Consume(t testing.TB, count int, timeout time.Duration) []Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout+natsReadyTimeout)
	defer cancel()
	nc, js := n.connect(t)
	defer nc.Close()
	consumer, err := js.CreateOrUpdateConsumer(ctx, NATSStream, jetstream.ConsumerConfig{
		Durable:   natsConsumer,
		AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("nats-server: consumer: %v", err)
	}
	var got []Received
	deadline := time.Now().Add(timeout)
	for len(got) < count {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		batch, err := consumer.Fetch(count-len(got), jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatalf("nats-server: fetch: %v", err)
		}
		for msg := range batch.Messages() {
			r := Received{Body: bytes.Clone(msg.Data()), Headers: map[string]string{}}
			for name, values := range msg.Headers() {
				if len(values) > 0 {
					r.Headers[name] = values[0]
				}
			}
			if err := msg.Ack(); err != nil {
				t.Fatalf("nats-server: ack: %v", err)
			}
			got = append(got, r)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("nats-server: fetch: %v", err)
		}
	}
	return got
}

// connect connects the helper itself, as the admin user when the server has users.
func (n *NATS) connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	opts := []nats.Option{nats.Name("brokertest"), nats.Timeout(5 * time.Second)}
	if n.tlsCert != "" {
		cfg := &tls.Config{RootCAs: n.tlsRoots, MinVersion: tls.VersionTLS12}
		if n.clientCert != nil {
			cfg.Certificates = []tls.Certificate{*n.clientCert}
		}
		opts = append(opts, nats.Secure(cfg))
	}
	switch {
	case n.token != "":
		opts = append(opts, nats.Token(n.token))
	case len(n.users) > 0:
		opts = append(opts, nats.UserInfo(natsAdmin, n.adminPass))
	}
	var nc *nats.Conn
	var err error
	for deadline := time.Now().Add(natsReadyTimeout); ; {
		nc, err = nats.Connect(n.URL(), opts...)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server at %s: %v\n%s", n.Addr(), err, n.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatalf("nats-server: jetstream: %v", err)
	}
	return nc, js
}

// start runs the server on n.port and waits until it accepts connections.
func (n *NATS) start() error {
	if n.tlsCert != "" {
		if err := os.WriteFile(filepath.Join(n.dir, "cert.pem"), []byte(n.tlsCert), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(n.dir, "key.pem"), []byte(n.tlsKey), 0o600); err != nil {
			return err
		}
		if n.clientCA != "" {
			if err := os.WriteFile(filepath.Join(n.dir, "client-ca.pem"), []byte(n.clientCA), 0o600); err != nil {
				return err
			}
		}
	}
	conf := filepath.Join(n.dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(n.config()), 0o600); err != nil {
		return err
	}
	n.logPath = filepath.Join(n.dir, "nats.log")
	logFile, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(n.bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server dies with the test process, even when that one is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", n.bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.cmd, n.exited = cmd, exited
	for deadline := time.Now().Add(natsReadyTimeout); time.Now().Before(deadline); {
		select {
		case <-exited:
			n.cmd = nil
			return fmt.Errorf("%s exited at start:\n%s", n.bin, n.logTail())
		default:
		}
		conn, err := net.DialTimeout("tcp", n.Addr(), time.Second)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on %s within %s:\n%s", n.bin, n.Addr(), natsReadyTimeout, n.logTail())
}

// config is the server's configuration file: the port, JetStream's store, and the users.
func (n *NATS) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %q\n", n.Addr())
	// Above the default 1 MiB, so that one message can fill the socket of a paused server.
	fmt.Fprintf(&b, "max_payload: %d\n", NATSMaxPayload)
	fmt.Fprintf(&b, "jetstream { store_dir: %q }\n", filepath.Join(n.dir, "store"))
	if n.tlsCert != "" {
		fmt.Fprintf(&b, "tls { cert_file: %q, key_file: %q", filepath.Join(n.dir, "cert.pem"), filepath.Join(n.dir, "key.pem"))
		if n.clientCA != "" {
			fmt.Fprintf(&b, ", ca_file: %q, verify: true", filepath.Join(n.dir, "client-ca.pem"))
		}
		b.WriteString(" }\n")
	}
	if n.token != "" {
		fmt.Fprintf(&b, "authorization { token: %q }\n", n.token)
	}
	if len(n.users) > 0 {
		b.WriteString("authorization {\n  users = [\n")
		fmt.Fprintf(&b, "    { user: %q, password: %q }\n", natsAdmin, n.adminPass)
		for _, u := range n.users {
			fmt.Fprintf(&b, "    { user: %q, password: %q", u.Name, u.Password)
			if len(u.DenyPublish) > 0 {
				quoted := make([]string, len(u.DenyPublish))
				for i, s := range u.DenyPublish {
					quoted[i] = strconv.Quote(s)
				}
				fmt.Fprintf(&b, ", permissions: { publish: { deny: [%s] } }", strings.Join(quoted, ", "))
			}
			b.WriteString(" }\n")
		}
		b.WriteString("  ]\n}\n")
	}
	return b.String()
}

// stop stops the server at cleanup: SIGTERM, then SIGKILL if it lingers.
func (n *NATS) stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT) // a paused server takes SIGTERM only once continued
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(natsStopTimeout):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd = nil
}

func (n *NATS) logTail() string {
	out, _ := os.ReadFile(n.logPath)
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(out)
}

// natsServerPath finds the nats-server binary: EnvNATSServer, else NATSServerBin under the module
// root above the working directory (go test runs in the package's directory).
func natsServerPath() (string, error) {
	if p := os.Getenv(EnvNATSServer); p != "" {
		return p, nil
	}
	return repo.Bin(filepath.Base(NATSServerBin), NATSServerBin)
}

// natsFreePort is a loopback port nothing listens on, as far as the kernel knows now.
func natsFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
