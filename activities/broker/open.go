package broker

import (
	"context"
	"fmt"

	"github.com/webhookd/webhookd/destination"
)

// Open opens the Publisher of t's kind (Settings.Type): one file per kind.
func Open(ctx context.Context, t Target) (Publisher, error) {
	switch t.Settings.Type {
	case destination.NATS:
		return OpenNATS(ctx, t)
	case destination.RabbitMQ:
		return OpenRabbitMQ(ctx, t)
	case destination.Kafka:
		return OpenKafka(ctx, t)
	case destination.SQS:
		return OpenSQS(ctx, t)
	}
	return nil, fmt.Errorf("no publisher for destinations of type %q", t.Settings.Type)
}
