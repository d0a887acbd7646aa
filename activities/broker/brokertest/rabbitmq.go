// Package brokertest starts real message brokers for tests, each a process of its own on free
// local ports that a test can kill -9 and start again on the same ports with its data kept, and
// reads what a test published into them.
package brokertest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/activities/egress/egresstest"
)

// RabbitMQServer is where Debian's rabbitmq-server package puts the broker's start script
// (/usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq user).
const RabbitMQServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// What StartRabbitMQ prepares, from a definitions file the broker loads at every boot: a virtual
// host, a durable direct exchange and durable queues bound to it under their own names.
const (
	RabbitVhost    = "hooks"
	RabbitExchange = "webhooks"
	// RabbitQueue is bound to RabbitExchange with routing key RabbitQueue, and reached through
	// the default exchange by its name.
	RabbitQueue = "deliveries"
	// RabbitFullQueue holds no message: its length limit is 0 and it rejects publishes, which
	// the broker answers with a nack (bound like RabbitQueue, under its own name).
	RabbitFullQueue = "full"
	// RabbitPublisher may configure, write and read everything in RabbitVhost; RabbitReader
	// may only read, so the broker refuses its publishes (403 ACCESS_REFUSED).
	RabbitPublisher = "publisher"
	RabbitReader    = "reader"
)

// RabbitMQ is a broker started by StartRabbitMQ.
type RabbitMQ struct {
	dir       string
	port      int
	tlsPort   int
	ca        *egresstest.CA
	env       []string
	passwords map[string]string // user -> password; admin consumes

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{} // closed when proc exited
}

// StartRabbitMQ starts a RabbitMQ broker of its own (its node name, AMQP, distribution and epmd
// ports, data, logs and configuration in a temporary directory; no plugin) and waits until it
// takes connections. It fails the test, with the command that installs it, when RabbitMQ is not
// installed. t.Cleanup stops it. Starting takes some seconds: share one across a package's tests.
func StartRabbitMQ(t testing.TB) *RabbitMQ {
	t.Helper()
	if _, err := os.Stat(RabbitMQServer); err != nil {
		t.Fatalf("RabbitMQ is not installed (%s is missing): run `make rabbitmq` (deployments/dev/ensure-rabbitmq.sh: apt-get install rabbitmq-server)", RabbitMQServer)
	}
	epmdBin, err := exec.LookPath("epmd")
	if err != nil {
		t.Fatalf("epmd, Erlang's port mapper, is missing (it comes with rabbitmq-server's erlang-base): run `make rabbitmq`: %v", err)
	}
	r := &RabbitMQ{
		dir: t.TempDir(),
		passwords: map[string]string{
			"admin": secret(t), RabbitPublisher: secret(t), RabbitReader: secret(t),
		},
	}
	ports := freePorts(t, 4)
	r.port, r.tlsPort = ports[0], ports[1]
	distPort, epmdPort := ports[2], ports[3]
	r.ca = egresstest.NewCA(t, "brokertest RabbitMQ CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))

	// epmd in the foreground, as a child of the test: the broker's own would daemonize and
	// outlive it.
	epmd := exec.Command(epmdBin, "-port", strconv.Itoa(epmdPort))
	epmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := epmd.Start(); err != nil {
		t.Fatalf("start epmd: %v", err)
	}
	t.Cleanup(func() {
		_ = epmd.Process.Kill()
		_ = epmd.Wait()
	})

	r.writeConfig(t, distPort, epmdPort)
	t.Cleanup(r.stop)
	r.start(t)
	return r
}

// URL is the publisher's URL, as a webhook stores it: no password (Password has it).
func (r *RabbitMQ) URL() string { return r.UserURL(RabbitPublisher) }

// Password is RabbitPublisher's password.
func (r *RabbitMQ) Password() string { return r.passwords[RabbitPublisher] }

// TLSURL is the publisher's amqps:// URL, on the broker's TLS listener, whose certificate (for
// 127.0.0.1) CA signed: a private authority, which no system trusts.
func (r *RabbitMQ) TLSURL() string {
	return fmt.Sprintf("amqps://%s@127.0.0.1:%d/%s", RabbitPublisher, r.tlsPort, RabbitVhost)
}

// CA is the authority of the TLS listener's certificate.
func (r *RabbitMQ) CA() *egresstest.CA { return r.ca }

// UserURL is user's URL in RabbitVhost.
func (r *RabbitMQ) UserURL(user string) string {
	return fmt.Sprintf("amqp://%s@127.0.0.1:%d/%s", user, r.port, RabbitVhost)
}

// UserPassword is user's password (RabbitPublisher, RabbitReader).
func (r *RabbitMQ) UserPassword(user string) string { return r.passwords[user] }

// Addr is the broker's AMQP address, host:port.
func (r *RabbitMQ) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Kill kills the broker with SIGKILL: its process group, the Erlang VM (beam.smp, the process
// started) and its helpers, and returns once the VM is gone. Its data stay for Restart.
func (r *RabbitMQ) Kill() {
	r.mu.Lock()
	proc, done := r.proc, r.done
	r.proc = nil
	r.mu.Unlock()
	if proc == nil {
		return
	}
	_ = syscall.Kill(-proc.Process.Pid, syscall.SIGKILL)
	<-done
}

// Pause stops the broker with SIGSTOP: it keeps its connections and its port, and answers
// nothing until Resume.
func (r *RabbitMQ) Pause(t testing.TB) { r.signal(t, syscall.SIGSTOP) }

// Resume continues the broker that Pause stopped.
func (r *RabbitMQ) Resume(t testing.TB) { r.signal(t, syscall.SIGCONT) }

func (r *RabbitMQ) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	r.mu.Lock()
	proc := r.proc
	r.mu.Unlock()
	if proc == nil {
		t.Fatalf("rabbitmq: %v: the broker is not running", sig)
	}
	if err := syscall.Kill(-proc.Process.Pid, sig); err != nil {
		t.Fatalf("rabbitmq: %v: %v", sig, err)
	}
}

// Restart starts the killed broker again, on the same ports with the same data, and waits until
// it takes connections.
func (r *RabbitMQ) Restart(t testing.TB) {
	t.Helper()
	r.Kill()
	r.start(t)
}

func (r *RabbitMQ) stop() { r.Kill() }

// Consume takes n messages from RabbitQueue, or fails the test when they did not all come within
// timeout.
func (r *RabbitMQ) Consume(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	return received(t, r.ConsumeDeliveries(t, RabbitQueue, n, timeout))
}

// Poll takes up to n messages from RabbitQueue: it returns once n came or once timeout passed, with
// what came.
func (r *RabbitMQ) Poll(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	return received(t, r.takeDeliveries(t, RabbitQueue, n, timeout))
}

func received(t testing.TB, ds []amqp.Delivery) []Received {
	t.Helper()
	out := make([]Received, len(ds))
	for i, d := range ds {
		headers := make(map[string]string, len(d.Headers))
		for name, v := range d.Headers {
			s, ok := v.(string)
			if !ok {
				t.Fatalf("header %s is a %T, not a string", name, v)
			}
			headers[name] = s
		}
		out[i] = Received{Body: d.Body, Headers: headers, Key: d.RoutingKey}
	}
	return out
}

// ConsumeDeliveries takes n messages from queue, acknowledged, with all their properties (the
// message id among them), or fails the test when they did not all come within timeout.
func (r *RabbitMQ) ConsumeDeliveries(t testing.TB, queue string, n int, timeout time.Duration) []amqp.Delivery {
	t.Helper()
	out := r.takeDeliveries(t, queue, n, timeout)
	if len(out) < n {
		t.Fatalf("rabbitmq: %d of %d messages from %s within %s", len(out), n, queue, timeout)
	}
	return out
}

// takeDeliveries takes up to n messages from queue, acknowledged, within timeout.
func (r *RabbitMQ) takeDeliveries(t testing.TB, queue string, n int, timeout time.Duration) []amqp.Delivery {
	t.Helper()
	conn, ch := r.admin(t)
	defer func() { _ = conn.Close() }()
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatalf("rabbitmq qos: %v", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("rabbitmq consume %s: %v", queue, err)
	}
	out := make([]amqp.Delivery, 0, n)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(out) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				t.Fatalf("rabbitmq: the consumer of %s closed after %d of %d messages", queue, len(out), n)
			}
			if err := d.Ack(false); err != nil {
				t.Fatalf("rabbitmq ack: %v", err)
			}
			out = append(out, d)
		case <-timer.C:
			return out
		}
	}
	return out
}

// Depth is how many messages wait in queue.
func (r *RabbitMQ) Depth(t testing.TB, queue string) int {
	t.Helper()
	conn, ch := r.admin(t)
	defer func() { _ = conn.Close() }()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("rabbitmq: queue %s: %v", queue, err)
	}
	return q.Messages
}

// admin opens a connection and a channel as the broker's administrator.
func (r *RabbitMQ) admin(t testing.TB) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	conn, err := r.dialAdmin()
	if err != nil {
		t.Fatalf("rabbitmq: connect as admin: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		t.Fatalf("rabbitmq: channel: %v", err)
	}
	return conn, ch
}

func (r *RabbitMQ) dialAdmin() (*amqp.Connection, error) {
	return amqp.DialConfig(fmt.Sprintf("amqp://admin@127.0.0.1:%d/%s", r.port, RabbitVhost), amqp.Config{
		SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "admin", Password: r.passwords["admin"]}},
		Dial: amqp.DefaultDial(5 * time.Second),
	})
}

// writeConfig writes the broker's configuration, its environment file (empty: the system's is
// not read), its plugins (none) and the definitions it loads at boot.
func (r *RabbitMQ) writeConfig(t testing.TB, distPort, epmdPort int) {
	t.Helper()
	server := r.ca.Server(t)
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
listeners.ssl.default = 127.0.0.1:%d
ssl_options.cacertfile = %s
ssl_options.certfile = %s
ssl_options.keyfile = %s
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users = none
load_definitions = %s
log.file.level = info
log.console = false
`, r.port, r.tlsPort, filepath.Join(r.dir, "ca.pem"), filepath.Join(r.dir, "server.pem"), filepath.Join(r.dir, "server.key"),
		filepath.Join(r.dir, "definitions.json"))
	perm := func(user, configure, write, read string) map[string]string {
		return map[string]string{"user": user, "vhost": RabbitVhost, "configure": configure, "write": write, "read": read}
	}
	var users []map[string]string
	for _, u := range []string{"admin", RabbitPublisher, RabbitReader} {
		tags := ""
		if u == "admin" {
			tags = "administrator"
		}
		users = append(users, map[string]string{"name": u, "password": r.passwords[u], "tags": tags})
	}
	queue := func(name string, args map[string]any) map[string]any {
		return map[string]any{"name": name, "vhost": RabbitVhost, "durable": true, "auto_delete": false, "arguments": args}
	}
	binding := func(queue string) map[string]any {
		return map[string]any{"source": RabbitExchange, "vhost": RabbitVhost, "destination": queue,
			"destination_type": "queue", "routing_key": queue, "arguments": map[string]any{}}
	}
	defs := map[string]any{
		"vhosts": []map[string]string{{"name": RabbitVhost}},
		"users":  users,
		"permissions": []map[string]string{
			perm("admin", ".*", ".*", ".*"),
			perm(RabbitPublisher, ".*", ".*", ".*"),
			perm(RabbitReader, "", "", ".*"),
		},
		"exchanges": []map[string]any{{"name": RabbitExchange, "vhost": RabbitVhost, "type": "direct",
			"durable": true, "auto_delete": false, "internal": false, "arguments": map[string]any{}}},
		"queues": []map[string]any{
			queue(RabbitQueue, map[string]any{}),
			queue(RabbitFullQueue, map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"}),
		},
		"bindings": []map[string]any{binding(RabbitQueue), binding(RabbitFullQueue)},
	}
	definitions, err := json.Marshal(defs)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"rabbitmq.conf":     []byte(conf),
		"ca.pem":            []byte(r.ca.CertPEM),
		"server.pem":        []byte(server.CertPEM),
		"server.key":        []byte(server.KeyPEM),
		"definitions.json":  definitions,
		"enabled_plugins":   []byte("[].\n"),
		"rabbitmq-env.conf": nil,
		"advanced.config":   []byte("[].\n"),
	} {
		if err := os.WriteFile(filepath.Join(r.dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r.env = append(os.Environ(),
		"HOME="+r.dir, // the Erlang cookie
		"RABBITMQ_NODENAME=webhookd-test-"+strconv.Itoa(r.port)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(r.port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"ERL_EPMD_PORT="+strconv.Itoa(epmdPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(r.dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "rabbitmq.pid"),
		// The script execs erl, which execs the Erlang VM (beam.smp): the test's child is the
		// VM itself, not a shell that waits for it, so Kill's SIGKILL reaches the broker and
		// Wait returns once it is gone. -noinput, as the script's default mode has it.
		"RABBITMQ_ALLOW_INPUT=true",
		"RABBITMQ_SERVER_START_ARGS=-noinput",
	)
}

// start starts the broker's process and waits until the broker takes connections with the
// definitions loaded.
func (r *RabbitMQ) start(t testing.TB) {
	t.Helper()
	out, err := os.OpenFile(filepath.Join(r.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(RabbitMQServer)
	cmd.Env = r.env
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: the Erlang VM runs helpers of its own (erl_child_setup,
	// inet_gethost, a shell for the disk monitor); Kill kills the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start rabbitmq-server: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(done)
	}()
	r.mu.Lock()
	r.proc, r.done = cmd, done
	r.mu.Unlock()

	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("rabbitmq-server exited while starting; its output:\n%s", r.tail())
		default:
		}
		if last = r.ready(); last == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("rabbitmq-server did not take connections within 90s (%v); its output:\n%s", last, r.tail())
}

// ready is nil once the admin connects and finds RabbitQueue.
func (r *RabbitMQ) ready() error {
	conn, err := r.dialAdmin()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclarePassive(RabbitQueue, true, false, false, false, nil)
	return err
}

// tail is the end of the broker's output and log, for a failed start.
func (r *RabbitMQ) tail() string {
	var b bytes.Buffer
	for _, name := range []string{"server.log", filepath.Join("log", "webhookd-test-"+strconv.Itoa(r.port)+"@localhost.log")} {
		data, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", name, data)
	}
	return b.String()
}

// freePorts are n distinct local ports free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

func secret(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
