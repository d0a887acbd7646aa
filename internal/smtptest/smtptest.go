// Package smtptest runs a real SMTP server in the test process (github.com/emersion/go-smtp on a
// loopback port): the owner's e-mails travel over SMTP to it, as they would to a mail relay, and
// the test reads what arrived.
package smtptest

import (
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	smtp "github.com/emersion/go-smtp"
)

// Mailbox is the server and what it received, in the order it came.
type Mailbox struct {
	// Addr is the server's host:port: smtp://<Addr> is its URL.
	Addr string
	mu   sync.Mutex
	msgs []Mail
}

// Mail is one message as the server received it.
type Mail struct {
	From string
	To   []string
	Data string
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Mailbox {
	t.Helper()
	mb := &Mailbox{}
	srv := smtp.NewServer(mb)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mb.Addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return mb
}

// NewSession is the server's backend.
func (mb *Mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{mb: mb}, nil }

// Messages returns a copy of what arrived so far.
func (mb *Mailbox) Messages() []Mail {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]Mail(nil), mb.msgs...)
}

type session struct {
	mb   *Mailbox
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	s.mb.msgs = append(s.mb.msgs, Mail{From: s.from, To: s.to, Data: string(b)})
	s.mb.mu.Unlock()
	return nil
}

// Header returns the value of the message's header name ("" when it has none).
func (m Mail) Header(t testing.TB, name string) string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		t.Fatalf("parse mail: %v", err)
	}
	return msg.Header.Get(name)
}

// Text returns "Subject: <subject>", a blank line and the decoded plain-text body.
func (m Mail) Text(t testing.TB) string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		t.Fatalf("parse mail: %v", err)
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("read mail body: %v", err)
	}
	return "Subject: " + msg.Header.Get("Subject") + "\n\n" + string(b)
}
