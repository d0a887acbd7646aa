package activities

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/model"
)

// Attributes of an attempt's spans: ids and the event type only, never the URL's path or query (a
// credential may be in them), the body, the secret, the signature or a header's value.
const (
	attrDeliveryID = attribute.Key("webhookd.delivery.id")
	attrEventID    = attribute.Key("webhookd.event.id")
	attrWebhookID  = attribute.Key("webhookd.webhook.id")
	attrAttempt    = attribute.Key("webhookd.attempt")
	attrEventType  = attribute.Key("webhookd.event.type")
)

// startPost starts the client span of an attempt's POST and writes its W3C traceparent into
// header, so a receiver that traces joins the event's trace (and the attempt log, which records
// header, shows which trace an attempt was). With tracing off (no Tracer) it does nothing and
// returns a nil span: no traceparent is sent.
//
// Only traceparent goes out. The trace's tracestate and baggage may carry what a publisher or a
// vendor put there, which is not ours to hand to a third party.
func (a *Activities) startPost(ctx context.Context, in DeliverInput, w *model.Webhook, eventType string, header http.Header) (context.Context, trace.Span) {
	if a.Tracer == nil {
		return ctx, nil
	}
	attrs := append(attemptAttributes(in, w.ID, eventType), semconv.HTTPRequestMethodKey.String(http.MethodPost))
	if u, err := url.Parse(w.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddressKey.String(u.Hostname()))
	}
	ctx, span := a.Tracer.Start(ctx, http.MethodPost, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(header))
	header.Del("Tracestate")
	return ctx, span
}

// endPost records an attempt's outcome on its POST span (nil: tracing off, or nothing was posted,
// as when a breaker is open) and ends it, and names the attempt and its outcome on the activity's
// span (RunActivity:Deliver, the Temporal interceptor's, in ctx). The error type is the attempt's
// error class, the one the attempt log and the metrics show; the error text is left out, as it may
// quote what a receiver answered.
func (a *Activities) endPost(ctx context.Context, span trace.Span, in DeliverInput, webhookID int64, eventType string, res DeliverResult) {
	if a.Tracer == nil {
		return
	}
	var outcome []attribute.KeyValue
	if res.StatusCode != 0 {
		outcome = append(outcome, semconv.HTTPResponseStatusCodeKey.Int(res.StatusCode))
	}
	if res.ErrorClass != "" {
		outcome = append(outcome, semconv.ErrorTypeKey.String(res.ErrorClass))
	}
	attempt := trace.SpanFromContext(ctx)
	attempt.SetAttributes(attemptAttributes(in, webhookID, eventType)...)
	for _, s := range []trace.Span{span, attempt} {
		if s == nil {
			continue
		}
		s.SetAttributes(outcome...)
		if !res.Delivered {
			s.SetStatus(codes.Error, res.ErrorClass)
		}
	}
	if span != nil {
		span.End()
	}
}

func attemptAttributes(in DeliverInput, webhookID int64, eventType string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrDeliveryID.Int64(in.DeliveryID), attrEventID.Int64(in.EventID), attrWebhookID.Int64(webhookID),
		attrAttempt.Int(in.Attempt), attrEventType.String(eventType),
	}
}
