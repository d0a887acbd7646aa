package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/activities/broker"
	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// brokerReceiver is the kind of a webhook whose destination is a customer's broker
// (docs/destinations.md): NATS JetStream, RabbitMQ, Kafka or Amazon SQS. The body is the webhook's
// as an HTTPS receiver would get it, byte for byte, and the headers travel as the message's
// headers or attributes. The publish is made on the receiver's turn (egress.Client.Take: the
// broker host's and the webhook's caps, its rate limit, its breakers) over the webhook's own
// connection (broker.Pool), dialed through the address policy and the egress proxy.
type brokerReceiver struct {
	a        *Activities
	settings receiverSettings
	dest     destination.Settings
	creds    destination.Credentials
	body     []byte
}

// Error classes of a broker's refusal (broker.Refusal.Class).
const (
	ClassBrokerAuth    = broker.ClassBrokerAuth
	ClassBrokerMissing = broker.ClassBrokerMissing
	ClassBrokerRefused = broker.ClassBrokerRefused
)

func (k *brokerReceiver) build(at *attempt) error {
	w := &at.t.Webhook
	d, err := destination.Of(w.Destination)
	if err != nil || d == nil {
		return &permanentError{errType: ErrTypeBadInput, cause: fmt.Errorf("webhook %d: %w", w.ID, err),
			reason: "the webhook's destination cannot be read"}
	}
	k.dest = *d
	if k.settings, err = k.a.openSettings(w); err != nil {
		return err
	}
	if k.creds, err = k.a.Secrets.WebhookDestination(w); err != nil {
		return &permanentError{errType: ErrTypeSecretUnreadable, cause: err,
			reason: "the webhook's destination credentials cannot be opened with the current WEBHOOKD_SECRET_KEY"}
	}
	k.body, err = webhookRender(k.a, at, k.settings.secrets)
	return err
}

func (k *brokerReceiver) send(ctx context.Context, at *attempt) (*exchange, error) {
	a, in, w, ev := k.a, at.in, &at.t.Webhook, &at.t.Event
	if a.Brokers == nil {
		return nil, errors.New("no broker pool: this worker cannot deliver to a destination beyond HTTP")
	}
	orderingKey := ""
	if at.t.LaneSeq != nil {
		key, err := model.DeliveryLaneKey(ctx, a.DB, in.DeliveryID)
		if err != nil {
			return nil, err
		}
		orderingKey = brokerKey(key)
	}
	info := activity.GetInfo(ctx)
	turn, err := a.takeTurn(ctx, info, egress.Request{
		URL: w.URL, Host: brokerHost(w.URL, k.dest), Endpoint: a.endpointOf(w), Timeout: in.AttemptTimeout,
		Wait: a.turnWait(ctx, info, in.AttemptTimeout), Key: strconv.FormatInt(in.DeliveryID, 10),
	})
	var held *egress.HeldError
	if errors.As(err, &held) {
		return &exchange{held: held}, nil
	}
	if turn == nil && ctx.Err() != nil {
		return nil, fmt.Errorf("delivery %d: waiting for a turn: %w", in.DeliveryID, err)
	}
	defer turn.Cancel()

	x := &exchange{started: a.now()}
	msgID := wire.MessageID(ev.ID, w.ID)
	signature, serr := wire.StandardSignature(msgID, x.started, k.body, k.settings.secrets...)
	if serr != nil {
		return nil, fmt.Errorf("sign delivery %d: %w", in.DeliveryID, serr)
	}
	header := wire.DeliveryHeader(msgID, ev.EventType, a.UserAgent, x.started)
	header.Del("User-Agent")
	if seq := at.t.LaneSeq; seq != nil {
		header.Set(wire.HeaderSequence, strconv.FormatInt(*seq, 10))
		if in.Resend {
			header.Set(wire.HeaderResend, "true")
		}
	}
	x.sent = sentHeaders(header, k.settings.headers, "")
	header.Set(wire.HeaderSignature, signature)
	addCustomHeaders(header, k.settings.headers)
	msg := broker.Message{Body: k.body, Headers: messageHeaders(header), DedupID: msgID, OrderingKey: orderingKey}
	if err == nil {
		err = turn.Run(ctx, func(ctx context.Context) error {
			pub, release, err := a.Brokers.Get(ctx, w.ID, w.DestinationVersion(), func() broker.Target {
				return broker.Target{URL: w.URL, Settings: k.dest, Credentials: k.creds, Dial: a.Egress.Dial, HTTP: a.Egress.HTTP()}
			})
			if err != nil {
				return err
			}
			defer release()
			return pub.Publish(ctx, msg)
		})
	}
	if errors.As(err, &held) {
		return &exchange{held: held}, nil
	}
	x.latency, x.err = a.now().Sub(x.started), err
	return x, nil
}

func (k *brokerReceiver) classify(ctx context.Context, at *attempt, x *exchange) DeliverResult {
	res := DeliverResult{AttemptedAt: x.started, Delivered: x.err == nil}
	if x.err == nil {
		return res
	}
	if r := broker.AsRefusal(x.err); r != nil {
		res.ErrorClass, res.Error = r.Class, k.dest.Type+": "+r.Message
		return res
	}
	res.ErrorClass, res.Error = egress.Classify(x.err)
	res.Error = strings.Replace(res.Error, "the receiver", "the "+k.dest.Type+" broker", 1)
	var proxyErr *egress.ProxyError
	if errors.As(x.err, &proxyErr) {
		activity.GetLogger(ctx).Warn("egress proxy could not reach the broker", "delivery", at.in.DeliveryID, "error_class", res.ErrorClass, "err", proxyErr.Error())
	}
	return res
}

// messageHeaders are an attempt's headers as a broker message's: lower-case names, as the Standard
// Webhooks specification writes them.
func messageHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		out[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	return out
}

// brokerHost is the host whose limits a destination's publishes count against: the first broker
// its URL names, the scheme's port filled in.
func brokerHost(rawURL string, d destination.Settings) string {
	_, _, hosts, err := destination.CheckURL(rawURL, d, true)
	if err != nil || len(hosts) == 0 {
		return rawURL
	}
	return hosts[0]
}

// brokerKey is a lane's key as a broker's ordering key: a string's text without its JSON quotes,
// a number's or a boolean's text, a long value's hash; "" for the keyless lane.
func brokerKey(laneKey string) string {
	var s string
	if strings.HasPrefix(laneKey, `"`) && json.Unmarshal([]byte(laneKey), &s) == nil {
		return s
	}
	return laneKey
}

// NewBrokers is the pool of a worker's broker connections (broker.Pool): a publisher of the
// destination's kind per webhook, closed when db says its webhook changed or was deleted.
func NewBrokers(db *model.DB, log *slog.Logger) *broker.Pool {
	return &broker.Pool{Open: broker.Open, Log: log,
		Live: func(ctx context.Context, ids []int64) (map[int64]string, error) {
			return model.WebhookVersions(ctx, db, ids)
		}}
}
