package webhooks

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

// MaxTLSFieldBytes bounds each PEM text of a webhook's TLS settings.
const MaxTLSFieldBytes = 64 << 10

// CertificateWarning is how long before a certificate of a webhook's TLS settings expires that it
// is reported: the webhookd_webhook_certificates_expiring gauge and the portal's endpoint page.
const CertificateWarning = 14 * 24 * time.Hour

// TLSEdit is a request's TLS settings toward the receiver: Set false leaves the webhook's as they
// are; Set with JSON absent or null removes them; otherwise JSON is the object as sent, which
// replaces them whole.
type TLSEdit struct {
	Set  bool
	JSON json.RawMessage
}

// tlsRequest is the object a request sends.
type tlsRequest struct {
	CACert     *string `json:"caCert"`
	ClientCert *string `json:"clientCert"`
	ClientKey  *string `json:"clientKey"`
}

// Certificate is what a representation shows of a certificate: never its key.
type Certificate struct {
	Subject  string
	Issuer   string
	NotAfter time.Time
}

// TLSInfo is what every representation of a webhook shows of its TLS settings: the first
// certificate of its CA bundle and its client certificate (nil when not set), the key as
// AuthMask ("" when not set), and when the first of its certificates expires.
type TLSInfo struct {
	CACert     *Certificate
	ClientCert *Certificate
	ClientKey  string
	ExpiresAt  time.Time
	// Expiring: a certificate expires within CertificateWarning (or has expired).
	Expiring bool
}

// checkTLS parses and judges TLS settings as sent, nil for none, with the earliest notAfter of
// their certificates. A refusal names the field (tls.clientKey) and never quotes a value: a
// malformed object is 400; a PEM that does not parse, a key that does not match the certificate,
// a certificate expired or not yet valid, a certificate without its key or a key without its
// certificate is 422.
func checkTLS(raw json.RawMessage, now time.Time) (*model.ReceiverTLS, time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, time.Time{}, nil
	}
	var req tlsRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return nil, time.Time{}, malformed("tls."+typ.Field, "tls.%s must be a PEM string", typ.Field)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, time.Time{}, malformed("tls", "tls has an unknown field %s", clip(field))
		}
		return nil, time.Time{}, malformed("tls", `tls must be an object such as {"caCert": "-----BEGIN CERTIFICATE-----...", "clientCert": "...", "clientKey": "..."}, or null`)
	}
	str := func(v *string) string {
		if v == nil {
			return ""
		}
		return strings.TrimSpace(*v)
	}
	t := &model.ReceiverTLS{CACert: str(req.CACert), ClientCert: str(req.ClientCert), ClientKey: str(req.ClientKey)}
	switch {
	case t.CACert == "" && t.ClientCert == "" && t.ClientKey == "":
		return nil, time.Time{}, malformed("tls", "tls needs caCert, or clientCert and clientKey, or both; null removes it")
	case t.ClientCert != "" && t.ClientKey == "":
		return nil, time.Time{}, invalid("tls.clientKey", "tls.clientKey is required with tls.clientCert")
	case t.ClientKey != "" && t.ClientCert == "":
		return nil, time.Time{}, invalid("tls.clientCert", "tls.clientCert is required with tls.clientKey")
	}
	for field, v := range map[string]string{"caCert": t.CACert, "clientCert": t.ClientCert, "clientKey": t.ClientKey} {
		if len(v) > MaxTLSFieldBytes {
			return nil, time.Time{}, invalid("tls."+field, "tls.%s is longer than %d bytes", field, MaxTLSFieldBytes)
		}
	}
	var expires time.Time
	earliest := func(certs []*x509.Certificate) {
		for _, c := range certs {
			if expires.IsZero() || c.NotAfter.Before(expires) {
				expires = c.NotAfter
			}
		}
	}
	if t.CACert != "" {
		certs, err := pemCertificates("tls.caCert", t.CACert, now)
		if err != nil {
			return nil, time.Time{}, err
		}
		earliest(certs)
	}
	if t.ClientCert != "" {
		certs, err := pemCertificates("tls.clientCert", t.ClientCert, now)
		if err != nil {
			return nil, time.Time{}, err
		}
		earliest(certs[:1])
		if block, _ := pem.Decode([]byte(t.ClientKey)); block == nil || !strings.Contains(block.Type, "PRIVATE KEY") {
			return nil, time.Time{}, invalid("tls.clientKey", "tls.clientKey is not a PEM private key")
		}
		if _, err := tls.X509KeyPair([]byte(t.ClientCert), []byte(t.ClientKey)); err != nil {
			// The error could quote neither PEM, but its wording is the library's: ours is plainer.
			return nil, time.Time{}, invalid("tls.clientKey", "tls.clientKey is not a private key that matches tls.clientCert")
		}
	}
	return t, expires, nil
}

// pemCertificates parses every certificate of a PEM text: at least one, nothing but certificates,
// each valid at now.
func pemCertificates(field, text string, now time.Time) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, invalid(field, "%s holds a PEM block that is not a CERTIFICATE", field)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, invalid(field, "%s holds a certificate that does not parse", field)
		}
		switch {
		case now.After(c.NotAfter):
			return nil, invalid(field, "%s holds a certificate that expired on %s", field, c.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(c.NotBefore):
			return nil, invalid(field, "%s holds a certificate not valid before %s", field, c.NotBefore.UTC().Format(time.RFC3339))
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 || len(bytes.TrimSpace(rest)) != 0 {
		return nil, invalid(field, "%s must be PEM certificates (-----BEGIN CERTIFICATE-----)", field)
	}
	return certs, nil
}

// sealTLS turns the TLS settings of a request into the model's change, checked and sealed as one
// JSON object (secretbox.Box.WebhookTLS opens it).
func (s *Service) sealTLS(e TLSEdit) (model.TLSChange, error) {
	if !e.Set {
		return model.TLSChange{}, nil
	}
	t, expires, err := checkTLS(e.JSON, model.Now())
	if err != nil || t == nil {
		return model.TLSChange{Set: true}, err
	}
	box, err := s.box()
	if err != nil {
		return model.TLSChange{}, err
	}
	plain, err := json.Marshal(t)
	if err != nil {
		return model.TLSChange{}, err
	}
	sealed, err := box.Seal(string(plain))
	if err != nil {
		return model.TLSChange{}, err
	}
	return model.TLSChange{Set: true, To: &sealed, ExpiresAt: &expires}, nil
}

// RedactedTLS is what every representation of w shows of its TLS settings, nil for none: the
// certificates' subjects, issuers and expiry, never the private key.
func (s *Service) RedactedTLS(w *model.Webhook) (*TLSInfo, error) {
	if w.TLS == nil {
		return nil, nil
	}
	box, err := s.box()
	if err != nil {
		return nil, err
	}
	t, err := box.WebhookTLS(w)
	if err != nil {
		return nil, err
	}
	info := &TLSInfo{CACert: firstCertificate(t.CACert), ClientCert: firstCertificate(t.ClientCert)}
	if t.ClientKey != "" {
		info.ClientKey = AuthMask
	}
	if w.TLSExpiresAt != nil {
		info.ExpiresAt = w.TLSExpiresAt.UTC()
		info.Expiring = model.Now().Add(CertificateWarning).After(info.ExpiresAt)
	}
	return info, nil
}

// firstCertificate shows the first certificate of a PEM text, nil for none.
func firstCertificate(text string) *Certificate {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return &Certificate{Subject: c.Subject.String(), Issuer: c.Issuer.String(), NotAfter: c.NotAfter.UTC()}
}
