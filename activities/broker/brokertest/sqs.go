package brokertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	"github.com/webhookd/webhookd/internal/repo"
)

// The queues and account of a goaws that StartSQS runs. SQSQueue is a standard queue,
// SQSFIFOQueue a FIFO queue with de-duplication on. goaws de-duplicates only when its
// EnableDuplicates is set, which StartSQS sets, and unlike SQS it forgets a MessageDeduplicationId
// once its message is deleted, rather than after 5 minutes.
const (
	SQSAccount   = "100010001000"
	SQSRegion    = "us-east-1"
	SQSQueue     = "webhooks"
	SQSFIFOQueue = "webhooks.fifo"
	// SQSAccessKeyID and SQSSecret are credentials for goaws, which checks none: any signed
	// request is taken.
	SQSAccessKeyID = "AKIDWEBHOOKDTEST"
	SQSSecret      = "goaws-secret-access-key-not-checked"
)

// SQS is a goaws (github.com/Admiral-Piett/goaws, built into bin/goaws by `make bin/goaws`) run
// as a process on a free local port: an SQS that speaks the query protocol and keeps its queues
// in memory. Its queues come from its configuration file, so a restart has them again, empty: a
// message stored before a Kill is gone. goaws checks no signature, so it refuses no credential.
type SQS struct {
	bin    string
	config string
	log    string
	port   int
	cmd    *exec.Cmd
	waited chan struct{}
	client *sqs.Client
}

// StartSQS starts goaws with SQSQueue and SQSFIFOQueue; t.Cleanup stops it. It fails t when
// bin/goaws is absent, with the command that builds it.
func StartSQS(t testing.TB) *SQS {
	t.Helper()
	bin, err := goawsPath()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port, err := sqsFreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &SQS{bin: bin, config: filepath.Join(dir, "goaws.yaml"), log: filepath.Join(dir, "goaws.log"), port: port}
	config := fmt.Sprintf(`Local:
  Host: 127.0.0.1
  Port: %d
  Region: %s
  AccountId: "%s"
  LogToFile: false
  EnableDuplicates: true
  QueueAttributeDefaults:
    VisibilityTimeout: 30
    ReceiveMessageWaitTimeSeconds: 0
    MaximumMessageSize: 262144
  Queues:
    - Name: %s
    - Name: %s
`, port, SQSRegion, SQSAccount, SQSQueue, SQSFIFOQueue)
	if err := os.WriteFile(s.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s.client = sqs.New(sqs.Options{
		Region:       SQSRegion,
		BaseEndpoint: aws.String("http://" + s.addr()),
		Credentials:  credentials.NewStaticCredentialsProvider(SQSAccessKeyID, SQSSecret, ""),
		HTTPClient:   &http.Client{Timeout: 10 * time.Second},
		Retryer:      aws.NopRetryer{},
	}, func(o *sqs.Options) { o.Protocol = awsquery.New(schemas.AmazonSQS) })
	t.Cleanup(s.stop)
	s.start(t)
	return s
}

// goawsPath is bin/goaws at the module root.
func goawsPath() (string, error) { return repo.Bin("goaws", "bin/goaws") }

// sqsFreePort is a loopback port that nothing listened on a moment ago.
func sqsFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

func (s *SQS) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is SQSQueue's queue URL, as a webhook stores it.
func (s *SQS) URL() string { return s.QueueURL(SQSQueue) }

// FIFOURL is SQSFIFOQueue's queue URL.
func (s *SQS) FIFOURL() string { return s.QueueURL(SQSFIFOQueue) }

// QueueURL is the URL of the queue name at this goaws (no such queue need exist).
func (s *SQS) QueueURL(name string) string {
	return "http://" + s.addr() + "/" + SQSAccount + "/" + name
}

// start runs goaws and waits until it answers.
func (s *SQS) start(t testing.TB) {
	t.Helper()
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(s.bin, "-config", s.config, "Local")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start goaws: %v", err)
	}
	s.cmd, s.waited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.waited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.client.ListQueues(ctx, &sqs.ListQueuesInput{})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.waited:
			out, _ := os.ReadFile(s.log)
			t.Fatalf("goaws exited at start: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log)
			t.Fatalf("goaws not answering after 30s: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill ends goaws with SIGKILL and waits until it is gone; its port then refuses connections.
func (s *SQS) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.waited
	s.cmd = nil
}

// Freeze stops goaws with SIGSTOP: the kernel still takes connections on its port, and nothing
// answers them until Thaw.
func (s *SQS) Freeze(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze goaws: %v", err)
	}
	t.Cleanup(func() { s.signal(syscall.SIGCONT) })
	// The signal is delivered, not yet acted on: a thread of goaws that is running finishes its
	// time slice first, and in CI one answered a publish made after Freeze returned
	// (TestSQSDeadline: class "", want "timeout"). Return once every thread has stopped.
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(s.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("goaws (pid %d) did not stop within 10 s of SIGSTOP", s.cmd.Process.Pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopped tells whether every thread of process pid is stopped (state T in /proc).
func stopped(pid int) bool {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses and may hold spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Thaw resumes a goaws that Freeze stopped.
func (s *SQS) Thaw(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("thaw goaws: %v", err)
	}
}

func (s *SQS) signal(sig syscall.Signal) {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Restart starts goaws again on the same port, with its queues, empty.
func (s *SQS) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t)
}

func (s *SQS) stop() { s.Kill() }

// Consume receives up to n messages of SQSQueue within timeout, deleting each it received.
func (s *SQS) Consume(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	return s.ConsumeQueue(t, s.URL(), n, timeout)
}

// Poll is Consume: it never fails the test for what did not come.
func (s *SQS) Poll(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	return s.Consume(t, n, timeout)
}

// ConsumeQueue receives up to n messages of the queue at queueURL: it returns once n arrived or
// once timeout passed, with what arrived. Each message's attributes are its Headers. Key stays
// empty: goaws does not return a FIFO message's MessageGroupId (ReceiveHeld shows the groups).
func (s *SQS) ConsumeQueue(t testing.TB, queueURL string, n int, timeout time.Duration) []Received {
	t.Helper()
	var got []Received
	deadline := time.Now().Add(timeout)
	for len(got) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// One message per receive: goaws v0.4.5, asked for more of a FIFO queue, hides the rest
		// of a message group for the visibility timeout without returning them.
		out, err := s.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			WaitTimeSeconds:             1,
		})
		cancel()
		if err != nil {
			t.Fatalf("receive from goaws: %v", err)
		}
		for _, m := range out.Messages {
			got = append(got, sqsReceived(m))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := s.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
			cancel()
			if err != nil {
				t.Fatalf("delete from goaws: %v", err)
			}
		}
	}
	return got
}

// ReceiveHeld receives one message of the queue at queueURL and keeps it, undeleted, for the
// queue's visibility timeout (30 seconds); nil when none is ready. On a FIFO queue, a message
// received and not deleted holds back the rest of its group: which messages a series of
// ReceiveHeld returns shows the groups they were sent in, which goaws does not return.
func (s *SQS) ReceiveHeld(t testing.TB, queueURL string) *Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(queueURL),
		MaxNumberOfMessages:   1,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatalf("receive from goaws: %v", err)
	}
	if len(out.Messages) == 0 {
		return nil
	}
	r := sqsReceived(out.Messages[0])
	return &r
}

func sqsReceived(m types.Message) Received {
	r := Received{Body: []byte(aws.ToString(m.Body)), Headers: map[string]string{}}
	for name, v := range m.MessageAttributes {
		r.Headers[name] = aws.ToString(v.StringValue)
	}
	return r
}
