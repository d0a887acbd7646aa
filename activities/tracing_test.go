package activities

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/webhookd/webhookd/model"
)

// TestPostSpan: with a tracer, an attempt's POST gets a client span under the attempt's, and the
// request carries that span's traceparent and nothing else of the trace; the span names the host,
// never the URL's path or query. Without one, no traceparent is sent.
func TestPostSpan(t *testing.T) {
	w := &model.Webhook{ID: 7, URL: "https://hooks.example.com:8443/in/tok3n?key=s3cr3t"}
	in := DeliverInput{DeliveryID: 11, EventID: 5, WebhookID: 7, Attempt: 2}

	off := &Activities{}
	header := http.Header{}
	ctx, span := off.startPost(context.Background(), in, w, "lead.captured", header)
	off.endPost(ctx, span, in, w.ID, "lead.captured", DeliverResult{Delivered: true, StatusCode: 200})
	if span != nil || len(header) != 0 {
		t.Fatalf("tracing off: span %v, headers %v; want none", span, header)
	}

	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	on := &Activities{Tracer: tracer}
	// The attempt's span, as the Temporal interceptor starts it, with a tracestate a publisher set.
	ts, _ := trace.ParseTraceState("vendor=private")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts})
	actx, attempt := tracer.Start(trace.ContextWithSpanContext(context.Background(), parent), "RunActivity:Deliver")
	header = http.Header{"Content-Type": {"application/json"}}
	ctx, span = on.startPost(actx, in, w, "lead.captured", header)
	on.endPost(actx, span, in, w.ID, "lead.captured", DeliverResult{StatusCode: 500, ErrorClass: ClassHTTPStatus})
	attempt.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the POST and the attempt", len(spans))
	}
	post := spans[0]
	want := "00-" + post.SpanContext().TraceID().String() + "-" + post.SpanContext().SpanID().String() + "-01"
	if got := header.Get("traceparent"); got != want || post.SpanContext().TraceID() != parent.TraceID() {
		t.Errorf("traceparent = %q, want %q, in the attempt's trace", got, want)
	}
	if len(header) != 2 {
		t.Errorf("headers = %v, want Content-Type and traceparent only (no tracestate, no baggage)", header)
	}
	if post.Name() != "POST" || post.SpanKind() != trace.SpanKindClient || post.Parent().SpanID() != attempt.SpanContext().SpanID() || ctx == actx {
		t.Errorf("POST span %q kind %v parent %v", post.Name(), post.SpanKind(), post.Parent())
	}
	attrs := map[string]string{}
	for _, kv := range post.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		"server.address": "hooks.example.com", "http.request.method": "POST", "http.response.status_code": "500",
		"error.type": "http_status", "webhookd.delivery.id": "11", "webhookd.event.id": "5", "webhookd.webhook.id": "7",
		"webhookd.attempt": "2", "webhookd.event.type": "lead.captured",
	} {
		if attrs[k] != v {
			t.Errorf("POST span %s = %q, want %q", k, attrs[k], v)
		}
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, "tok3n") || strings.Contains(v, "s3cr3t") {
				t.Errorf("%s: %s = %q holds the URL's path or query", s.Name(), kv.Key, v)
			}
		}
	}
	if got := spans[1].Attributes(); len(got) != 7 {
		t.Errorf("attempt span attributes = %v, want the ids, the event type, the status and the error type", got)
	}
}
