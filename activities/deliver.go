package activities

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/model"
)

const (
	// maxResponseRead is how much of a receiver's reply is read; the rest is discarded unread.
	maxResponseRead = 64 << 10
	// maxResponseKept is how much of it the attempt log keeps.
	maxResponseKept = 1 << 10
)

// Deliver makes one attempt: it loads the event and webhook, builds and signs the body, POSTs it
// and records the outcome. The receiver's failure is a result, not an error: Temporal never
// retries an HTTP attempt (the workflow's timers are the schedule). An error means our own
// infrastructure failed (the database), and Temporal retries that.
func (a *Activities) Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error) {
	target, err := model.LoadDeliveryTarget(ctx, a.DB, in.DeliveryID)
	if err != nil {
		return DeliverResult{}, fmt.Errorf("load delivery %d: %w", in.DeliveryID, err)
	}
	w := &target.Webhook
	if w.DeletedAt != nil {
		if err := model.SetDeliveryState(ctx, a.DB, in.DeliveryID, model.DeliveryCanceled); err != nil {
			return DeliverResult{}, err
		}
		return DeliverResult{WebhookGone: true}, nil
	}
	secrets, err := a.signingSecrets(w)
	if err != nil {
		return DeliverResult{}, err
	}
	ev := &target.Event
	var body []byte
	if w.Variant == model.VariantA {
		body = BodyA(ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt)
	} else {
		body = BodyB(ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt, secrets[0])
	}

	started := a.now()
	msgID := MessageID(ev.ID, w.ID)
	signature, err := StandardSignature(msgID, started, body, secrets...)
	if err != nil {
		return DeliverResult{}, fmt.Errorf("sign delivery %d: %w", in.DeliveryID, err)
	}
	status, respBody, postErr := a.post(ctx, w.URL, body, http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {a.UserAgent},
		"X-Service-Event":   {ev.EventType},
		"Webhook-Id":        {msgID},
		"Webhook-Timestamp": {strconv.FormatInt(started.Unix(), 10)},
		"Webhook-Signature": {signature},
	})
	latency := a.now().Sub(started)

	res := DeliverResult{StatusCode: status, AttemptedAt: started}
	switch {
	case postErr != nil:
		res.ErrorClass, res.Error = classify(postErr)
	case status >= 300 && status < 400:
		res.ErrorClass, res.Error = ClassRedirect, fmt.Sprintf("receiver answered %d (redirects are not followed)", status)
	case status < 200 || status >= 300:
		res.ErrorClass, res.Error = ClassHTTPStatus, fmt.Sprintf("receiver answered %d", status)
	default:
		res.Delivered = true
	}

	o := model.AttemptOutcome{Success: res.Delivered}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = in.DeliveryID, in.Attempt, w.URL, started, latency.Milliseconds()
	if status != 0 {
		o.StatusCode = &status
	}
	if !res.Delivered {
		o.ErrorClass, o.Error = &res.ErrorClass, &res.Error
		if in.NextAttemptIn > 0 {
			// The workflow's timer starts when this attempt ends.
			next := started.Add(latency + in.NextAttemptIn)
			o.NextAttemptAt = &next
		}
	}
	if len(respBody) > 0 {
		kept := truncateUTF8(respBody, maxResponseKept)
		o.ResponseBody = &kept
	}
	if err := model.RecordAttempt(ctx, a.DB, w, o); err != nil {
		return DeliverResult{}, err
	}
	if a.Metrics != nil {
		a.Metrics.observeAttempt(w.Variant, ev.EventType, res, latency)
	}
	activity.GetLogger(ctx).Info("delivery attempt", "delivery", in.DeliveryID, "webhook", w.ID, "attempt", in.Attempt,
		"delivered", res.Delivered, "status", status, "error_class", res.ErrorClass, "latency_ms", latency.Milliseconds())
	return res, nil
}

// signingSecrets returns the webhook's current secret and, during a rotation overlap, the previous
// one: both sign, so receivers can switch at their own pace.
func (a *Activities) signingSecrets(w *model.Webhook) ([]string, error) {
	current, err := a.Secrets.Open(w.Secret)
	if err != nil {
		return nil, fmt.Errorf("open secret of webhook %d: %w", w.ID, err)
	}
	secrets := []string{current}
	if w.PreviousSecret != nil && w.PreviousSecretExpiresAt != nil && a.now().Before(*w.PreviousSecretExpiresAt) {
		prev, err := a.Secrets.Open(*w.PreviousSecret)
		if err != nil {
			return nil, fmt.Errorf("open previous secret of webhook %d: %w", w.ID, err)
		}
		secrets = append(secrets, prev)
	}
	return secrets, nil
}

// post sends one request within the attempt timeout and reads at most maxResponseRead of the reply.
func (a *Activities) post(ctx context.Context, url string, body []byte, header http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = header
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))
	if err != nil && !errors.Is(err, io.EOF) {
		// The status line arrived but the body did not finish in time: the exchange failed.
		return resp.StatusCode, data, err
	}
	return resp.StatusCode, data, nil
}

// classify names why an exchange failed, for the attempt log and metrics, with a message that is
// safe to show the webhook's owner.
func classify(err error) (class, message string) {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, model.ErrBlockedAddress):
		return ClassBlocked, "the receiver's address is not public; webhookd does not connect to it"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ClassTimeout, "the receiver did not answer in time"
	case errors.As(err, &dnsErr):
		return ClassDNS, "the receiver's host name does not resolve: " + dnsErr.Err
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRefused, "the receiver refused the connection"
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr), errors.As(err, &recordErr):
		return ClassTLS, "TLS handshake failed: " + err.Error()
	}
	return ClassNetwork, "network error: " + err.Error()
}

func truncateUTF8(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return model.Now()
}
