package activities

import (
	"net/http"
	"testing"

	"github.com/webhookd/webhookd/destination"
)

// TestBrokerKey: a lane's key as stored (model.LaneKeyOf: a value's JSON text) becomes the broker's
// ordering key as the receiver reads the value: a string without its quotes, a number's or a
// boolean's text, a long value's hash as it is; the keyless lane sends none.
func TestBrokerKey(t *testing.T) {
	for stored, want := range map[string]string{
		`"cust_1"`:        "cust_1",
		`"say \"hi\""`:    `say "hi"`,
		`42`:              "42",
		`true`:            "true",
		"sha256:0a1b2c":   "sha256:0a1b2c",
		"":                "",
		`"ünïcödé ключ"`:  "ünïcödé ключ",
		`"not closed`:     `"not closed`,
		`"\u00e9t\u00e9"`: "été",
	} {
		if got := brokerKey(stored); got != want {
			t.Errorf("brokerKey(%q) = %q, want %q", stored, got, want)
		}
	}
}

// TestMessageHeaders: an attempt's headers travel under their lower-case names, as the Standard
// Webhooks specification writes them, whatever Go's canonical form.
func TestMessageHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("Webhook-Id", "msg_1")
	h.Set("webhook-timestamp", "1700000000")
	h.Set("X-Custom", "a")
	got := messageHeaders(h)
	if len(got) != 3 || got["webhook-id"] != "msg_1" || got["webhook-timestamp"] != "1700000000" || got["x-custom"] != "a" {
		t.Fatalf("messageHeaders = %v", got)
	}
}

// TestBrokerHost: a destination's publishes count against its first broker's host:port, the
// scheme's port filled in.
func TestBrokerHost(t *testing.T) {
	for _, c := range []struct {
		url  string
		d    destination.Settings
		want string
	}{
		{"tls://nats.example.com", destination.Settings{Type: destination.NATS, Subject: "x"}, "nats.example.com:4222"},
		{"kafka+tls://u@b1.example.com:9094,b2.example.com", destination.Settings{Type: destination.Kafka, Topic: "t"}, "b1.example.com:9094"},
		{"amqp://guest@MQ.example.com/vh", destination.Settings{Type: destination.RabbitMQ, RoutingKey: "q"}, "mq.example.com:5672"},
		{"https://sqs.us-east-1.amazonaws.com/1/q", destination.Settings{Type: destination.SQS}, "sqs.us-east-1.amazonaws.com:443"},
	} {
		if got := brokerHost(c.url, c.d); got != c.want {
			t.Errorf("brokerHost(%s) = %s, want %s", c.url, got, c.want)
		}
	}
}
