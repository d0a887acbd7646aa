// Package destination is what a webhook delivers into when it is not an HTTPS endpoint: a
// customer's NATS JetStream subject, RabbitMQ exchange, Kafka topic or Amazon SQS queue
// (docs/destinations.md). It holds the settings as stored and their checks, and does no I/O: the
// use cases (webhooks) check and seal them, and the delivery activity (activities/broker)
// publishes with them.
package destination

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
