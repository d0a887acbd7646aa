package activities

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	netmail "net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"
)

// Mail is one plain-text message.
type Mail struct {
	To      string
	Subject string
	Body    string
	// MessageID is the Message-ID header without its angle brackets. A notice's mail derives it from
	// the notice, so that a repeat (a retry after a crash) carries the same one and a mail client
	// shows one message; without a host part, the sender's domain is added. Empty: a random one.
	MessageID string
}

// Mailer sends e-mail alerts.
type Mailer interface {
	Send(ctx context.Context, m Mail) error
}

// NewMailer returns an SMTP mailer for smtpURL (smtp://user:pass@host:port, STARTTLS when the
// server offers it), or, when smtpURL is empty, a mailer that writes each message as an .eml file
// into dir: development needs no mail server and the alerts stay readable.
func NewMailer(smtpURL, from, dir string, roots *x509.CertPool) (Mailer, error) {
	if smtpURL == "" {
		return &DirMailer{Dir: dir, From: from}, nil
	}
	u, err := url.Parse(smtpURL)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
		return nil, errors.New("WEBHOOKD_SMTP_URL: must look like smtp://user:pass@host:port")
	}
	port := 587
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("WEBHOOKD_SMTP_URL: bad port %q", p)
		}
	}
	opts := []mail.Option{
		mail.WithPort(port),
		mail.WithTLSPolicy(mail.TLSOpportunistic),
		mail.WithTLSConfig(&tls.Config{ServerName: u.Hostname(), RootCAs: roots, MinVersion: tls.VersionTLS12}),
		mail.WithTimeout(30 * time.Second),
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(u.User.Username()), mail.WithPassword(pass))
	}
	return &SMTPMailer{host: u.Hostname(), from: from, opts: opts}, nil
}

// SMTPMailer sends through an SMTP server, one connection per message: alerts are rare.
type SMTPMailer struct {
	host string
	from string
	opts []mail.Option
}

// Send delivers m.
func (s *SMTPMailer) Send(ctx context.Context, m Mail) error {
	msg, err := message(s.from, m)
	if err != nil {
		return err
	}
	c, err := mail.NewClient(s.host, s.opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	return nil
}

// DirMailer writes each message as an .eml file.
type DirMailer struct {
	Dir  string
	From string
}

// Send writes m to a new file in Dir.
func (d *DirMailer) Send(_ context.Context, m Mail) error {
	msg, err := message(d.From, m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return fmt.Errorf("mail dir: %w", err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := filepath.Join(d.Dir, time.Now().UTC().Format("20060102T150405.000Z")+"-"+hex.EncodeToString(suffix)+".eml")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("mail file: %w", err)
	}
	if _, err := msg.WriteTo(f); err != nil {
		return fmt.Errorf("write %s: %w", name, errors.Join(err, f.Close()))
	}
	return f.Close()
}

func message(from string, m Mail) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(from); err != nil {
		return nil, fmt.Errorf("WEBHOOKD_MAIL_FROM %q: %w", from, err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("recipient %q: %w", m.To, err)
	}
	msg.Subject(m.Subject)
	msg.SetBodyString(mail.TypeTextPlain, m.Body)
	msg.SetDate()
	switch {
	case m.MessageID == "":
		msg.SetMessageID()
	case strings.Contains(m.MessageID, "@"):
		msg.SetMessageIDWithValue(m.MessageID)
	default:
		msg.SetMessageIDWithValue(m.MessageID + "@" + senderDomain(from))
	}
	return msg, nil
}

// senderDomain is the domain of the address from ("webhookd <alerts@example.com>": example.com),
// or "webhookd.invalid" when it has none.
func senderDomain(from string) string {
	if a, err := netmail.ParseAddress(from); err == nil {
		if _, domain, ok := strings.Cut(a.Address, "@"); ok && domain != "" {
			return domain
		}
	}
	return "webhookd.invalid"
}
