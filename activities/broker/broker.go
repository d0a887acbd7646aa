// Package broker publishes a delivery into a customer's message broker: one file per kind
// (nats.go, rabbitmq.go, kafka.go, sqs.go), each behind Publisher. The delivery activity's
// receiver kind (activities/receiver_broker.go) builds the Message and takes the receiver's turn;
// this package only speaks the broker's protocol, over connections dialed through Target.Dial,
// which applies webhookd's address policy at dial time and the egress proxy where one is set.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"

	"github.com/webhookd/webhookd/destination"
)

// Message is one delivery as a broker message.
type Message struct {
	// Body is the delivery body of the webhook's variant and version, byte for byte.
	Body []byte
	// Headers are webhook-id, webhook-timestamp, webhook-signature (and B's body signature),
	// content-type, webhook-sequence...: message headers or attributes, under these names.
	Headers map[string]string
	// DedupID is the broker's de-duplication id, the webhook-id: JetStream Nats-Msg-Id, AMQP
	// message_id, SQS FIFO MessageDeduplicationId, a Kafka record header.
	DedupID string
	// OrderingKey is the ordered lane's key ("" for none): the Kafka record key, the SQS FIFO
	// message group.
	OrderingKey string
}

// Target is where a Publisher publishes.
type Target struct {
	// URL is the webhook's URL as stored: no password in it (Credentials holds it).
	URL         string
	Settings    destination.Settings
	Credentials destination.Credentials
	// Dial opens every TCP connection to the broker: the address policy's check at dial time, and
	// the egress proxy's tunnel where one is set.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HTTP is the client of a kind that speaks HTTPS (SQS): the egress client's, which dials
	// through the same checks and never follows redirects.
	HTTP *http.Client
}

// Publisher publishes into one destination over connections it keeps open between attempts.
// Publish returns nil once the broker acknowledged the message durably (a JetStream ack, a
// publisher confirm, acks from all in-sync replicas, SQS's answer). A broker that was reached
// and refused the message returns a *Refusal; a connection that failed returns the network error.
// Publishers are safe for concurrent use; Close closes their connections.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
	Close() error
}

// The classes of a broker's refusal (Refusal.Class), recorded with the failed attempt beside the
// network classes of activities/egress.
const (
	// ClassBrokerAuth: the broker refused the credentials or the permission to publish.
	ClassBrokerAuth = "broker_auth"
	// ClassBrokerMissing: the stream, exchange, topic or queue does not exist.
	ClassBrokerMissing = "broker_missing"
	// ClassBrokerRefused: the broker was reached and did not take the message (a nack, a
	// rejected publish, a full stream or queue, an error answer).
	ClassBrokerRefused = "broker_refused"
)

// Refusal is a broker's answer refusing a publish: the broker was reached and answered, as an
// HTTP receiver answers an error status. Message is safe to show the webhook's owner: it names
// no credential.
type Refusal struct {
	Class   string
	Message string
	// Busy: the broker is overloaded (a full queue, a throttle), which the breaker counts as an
	// HTTP 503.
	Busy bool
	Err  error
}

func (r *Refusal) Error() string { return r.Message }

// Overloaded makes a Refusal an egress.Answer: the broker answered, so the breakers judge it as
// an HTTP reply (a 503 when Busy), never as a failure to reach the broker.
func (r *Refusal) Overloaded() bool { return r.Busy }
func (r *Refusal) Unwrap() error    { return r.Err }

// AsRefusal returns err's *Refusal, nil when it has none.
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// brokerTLS is the TLS of a broker's TLS URL (tls://, amqps://, kafka+tls://): the egress client's
// TLS when Target.HTTP's transport has one (its roots: the system's and the operator's extra CA
// file, WEBHOOKD_EXTRA_CA_FILE), else the system's roots; at least TLS 1.2, the broker's
// certificate checked for host, no HTTP protocol offered.
func brokerTLS(t Target, host string) *tls.Config {
	cfg := &tls.Config{}
	if t.HTTP != nil {
		if tr, ok := t.HTTP.Transport.(*http.Transport); ok && tr.TLSClientConfig != nil {
			cfg = tr.TLSClientConfig.Clone()
		}
	}
	cfg.ServerName = host
	cfg.NextProtos = nil
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	return cfg
}
