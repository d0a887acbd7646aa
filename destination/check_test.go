package destination

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		raw, field string
		malformed  bool
	}{
		{`{"type":"nats","subject":"orders.events"}`, "", false},
		{`{"type":"rabbitmq","routingKey":"orders"}`, "", false},
		{`{"type":"rabbitmq","exchange":"amq.topic","routingKey":"orders.#"}`, "", false},
		{`{"type":"kafka","topic":"orders"}`, "", false},
		{`{"type":"sqs","accessKeyId":"AKIA1","secretAccessKey":"s3cr3t"}`, "", false},
		{`"nats"`, "destination", true},
		{`{"subject":"x"}`, "destination.type", true},
		{`{"type":"mqtt"}`, "destination.type", false},
		{`{"type":"nats"}`, "destination.subject", true},
		{`{"type":"nats","subject":"orders.*"}`, "destination.subject", false},
		{`{"type":"nats","subject":"a..b"}`, "destination.subject", false},
		{`{"type":"nats","subject":"x","topic":"y"}`, "destination.topic", true},
		{`{"type":"nats","subject":"x","color":"y"}`, "destination", true},
		{`{"type":"nats","subject":5}`, "destination.subject", true},
		{`{"type":"rabbitmq"}`, "destination.routingKey", true},
		{`{"type":"rabbitmq","exchange":"a b","routingKey":"k"}`, "destination.exchange", false},
		{`{"type":"kafka"}`, "destination.topic", true},
		{`{"type":"kafka","topic":"a/b"}`, "destination.topic", false},
		{`{"type":"sqs","accessKeyId":"AKIA1"}`, "destination.secretAccessKey", true},
		{`{"type":"sqs","secretAccessKey":"s"}`, "destination.accessKeyId", true},
		{`{"type":"sqs","accessKeyId":"A","secretAccessKey":"s","region":"Mars"}`, "destination.region", false},
		{`{"type":"sqs","accessKeyId":"A","secretAccessKey":"s","messageGroupId":"a b"}`, "destination.messageGroupId", false},
		{`{"type":"nats","subject":"` + strings.Repeat("a", 256) + `"}`, "destination.subject", false},
	} {
		_, _, err := Parse(json.RawMessage(c.raw))
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.raw, err)
			}
			continue
		}
		var de *Error
		if !errors.As(err, &de) || de.Field != c.field || de.Malformed != c.malformed {
			t.Errorf("%s: err = %#v, want field %s malformed %v", c.raw, err, c.field, c.malformed)
		}
	}
}

func TestParseKeepsSecretsApart(t *testing.T) {
	s, c, err := Parse(json.RawMessage(`{"type":"sqs","accessKeyId":"AKIA1","secretAccessKey":"s3cr3t","sessionToken":"tok"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if strings.Contains(string(b), "s3cr3t") || strings.Contains(string(b), "tok") {
		t.Fatalf("settings hold a secret: %s", b)
	}
	if c.SecretAccessKey != "s3cr3t" || c.SessionToken != "tok" {
		t.Fatalf("credentials = %+v", c)
	}
}

func TestCheckURL(t *testing.T) {
	nats := Settings{Type: NATS, Subject: "x"}
	rabbit := Settings{Type: RabbitMQ, RoutingKey: "q"}
	kafka := Settings{Type: Kafka, Topic: "t"}
	sqs := Settings{Type: SQS}
	for _, c := range []struct {
		url       string
		s         Settings
		plaintext bool
		stored    string
		user      Credentials
		hosts     string
		refused   string
	}{
		{url: "tls://nats.example.com", s: nats, stored: "tls://nats.example.com", hosts: "nats.example.com:4222"},
		{url: "nats://nats.example.com:4223", s: nats, plaintext: true, stored: "nats://nats.example.com:4223", hosts: "nats.example.com:4223"},
		{url: "nats://nats.example.com", s: nats, refused: "must use tls://"},
		{url: "https://nats.example.com", s: nats, refused: "must start with tls://"},
		{url: "tls://u:p%40ss@nats.example.com", s: nats, stored: "tls://u@nats.example.com", user: Credentials{Username: "u", Password: "p@ss"}, hosts: "nats.example.com:4222"},
		{url: "tls://nats.example.com/x", s: nats, refused: "without a path"},
		{url: "amqps://guest:pw@mq.example.com/prod", s: rabbit, stored: "amqps://guest@mq.example.com/prod", user: Credentials{Username: "guest", Password: "pw"}, hosts: "mq.example.com:5671"},
		{url: "amqp://mq.example.com", s: rabbit, plaintext: true, stored: "amqp://mq.example.com", hosts: "mq.example.com:5672"},
		{url: "kafka+tls://a.example.com:9093,b.example.com", s: kafka, stored: "kafka+tls://a.example.com:9093,b.example.com:9093", hosts: "a.example.com:9093,b.example.com:9093"},
		{url: "kafka+tls://u:p@a.example.com", s: kafka, stored: "kafka+tls://u@a.example.com:9093", user: Credentials{Username: "u", Password: "p"}, hosts: "a.example.com:9093"},
		{url: "kafka+tls://a.example.com/x", s: kafka, refused: "without a path"},
		{url: "kafka+tls://a.example.com:0", s: kafka, refused: "port"},
		{url: "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo", s: sqs, stored: "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo", hosts: "sqs.us-east-1.amazonaws.com:443"},
		{url: "https://k:s@sqs.us-east-1.amazonaws.com/1/q", s: sqs, refused: "must not contain credentials"},
		{url: "https://sqs.us-east-1.amazonaws.com/q", s: sqs, refused: "queue URL"},
		{url: "tls://:pw@nats.example.com", s: nats, refused: "password without a user"},
	} {
		stored, user, hosts, err := CheckURL(c.url, c.s, c.plaintext)
		if c.refused != "" {
			var de *Error
			if !errors.As(err, &de) || de.Field != "url" || !strings.Contains(de.Reason, c.refused) {
				t.Errorf("%s: err = %v, want a refusal of url saying %q", c.url, err, c.refused)
			}
			if err != nil && strings.Contains(err.Error(), "pw") {
				t.Errorf("%s: the refusal quotes the password: %v", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if stored != c.stored || user != c.user || strings.Join(hosts, ",") != c.hosts {
			t.Errorf("%s: stored %q user %+v hosts %v; want %q %+v %s", c.url, stored, user, hosts, c.stored, c.user, c.hosts)
		}
	}
}

func TestRegion(t *testing.T) {
	if r := Region(Settings{}, "https://sqs.eu-west-3.amazonaws.com/1/q"); r != "eu-west-3" {
		t.Fatalf("region = %q", r)
	}
	if r := Region(Settings{Region: "us-east-2"}, "https://sqs.eu-west-3.amazonaws.com/1/q"); r != "us-east-2" {
		t.Fatalf("region = %q", r)
	}
	if r := Region(Settings{}, "http://127.0.0.1:4100/1/q"); r != "" {
		t.Fatalf("region = %q", r)
	}
}
