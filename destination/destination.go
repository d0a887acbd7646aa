// Package destination is what a webhook delivers into when it is not an HTTPS endpoint: a
// customer's NATS JetStream subject, RabbitMQ exchange, Kafka topic or Amazon SQS queue
// (docs/destinations.md). It holds the settings as stored and their checks, and does no I/O: the
// use cases (webhooks) check and seal them, and the delivery activity (activities/broker)
// publishes with them.
package destination

import (
	"encoding/json"
	"fmt"
)

// The kinds of destination (Settings.Type). A webhook without a destination is an HTTPS endpoint,
// exactly as the spec says.
const (
	NATS     = "nats"
	RabbitMQ = "rabbitmq"
	Kafka    = "kafka"
	SQS      = "sqs"
)

// Types are every kind, in the order the docs list them.
var Types = []string{NATS, RabbitMQ, Kafka, SQS}

// Settings are a destination's settings that are not secret, stored as JSON beside the webhook's
// URL and shown in every representation. Each kind reads its own fields.
type Settings struct {
	Type string `json:"type"`
	// NATS: the JetStream subject published to.
	Subject string `json:"subject,omitempty"`
	// RabbitMQ: the exchange ("" is the default exchange) and the routing key.
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routingKey,omitempty"`
	// Kafka: the topic.
	Topic string `json:"topic,omitempty"`
	// SQS: the queue's region and the access key's id; MessageGroupID is a FIFO queue's message
	// group when the webhook is not ordered.
	Region         string `json:"region,omitempty"`
	AccessKeyID    string `json:"accessKeyId,omitempty"`
	MessageGroupID string `json:"messageGroupId,omitempty"`
}

// Credentials are a destination's secrets, sealed as one JSON object (secretbox) and opened only
// by a delivery attempt: the password of the URL's user (NATS, RabbitMQ, Kafka SASL/PLAIN), a NATS
// token, an AWS secret access key and session token.
type Credentials struct {
	Username        string `json:"username,omitempty"`
	Password        string `json:"password,omitempty"`
	Token           string `json:"token,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
	SessionToken    string `json:"sessionToken,omitempty"`
}

// Error is a refusal of a destination as sent: Field names the member at fault (url,
// destination.subject), Reason is a sentence safe to show a client that never quotes a secret,
// and Malformed says the request's shape is wrong (400) rather than its values (422).
type Error struct {
	Field, Reason string
	Malformed     bool
}

func (e *Error) Error() string { return e.Reason }

// Checked is a destination as checked: what is stored, and the broker's hosts, which the address
// policy judges.
type Checked struct {
	Settings Settings
	// URL is the webhook's URL as stored and shown: the one sent without its password.
	URL string
	// Credentials are the secrets sent, from the URL's user and the destination's members.
	Credentials Credentials
	// Hosts are the broker's host:port pairs as the URL names them.
	Hosts []string
}

// Members are the members each kind takes beside its type (SecretMembers among them).
var Members = map[string][]string{
	NATS:     {"subject", "token"},
	RabbitMQ: {"exchange", "routingKey"},
	Kafka:    {"topic"},
	SQS:      {"region", "accessKeyId", "secretAccessKey", "sessionToken", "messageGroupId"},
}

// SecretMembers are the members of a destination object that are secrets: sealed, and shown as a
// mask.
var SecretMembers = []string{"token", "secretAccessKey", "sessionToken"}

// Of reads the stored JSON of a webhook's destination, nil for an HTTPS endpoint.
func Of(stored *string) (*Settings, error) {
	if stored == nil {
		return nil, nil
	}
	var s Settings
	if err := json.Unmarshal([]byte(*stored), &s); err != nil {
		return nil, fmt.Errorf("stored destination: %w", err)
	}
	return &s, nil
}
