package otlpsink

import (
	"context"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestSinkReceivesExport: the OTLP/HTTP exporter's requests, plain and gzip, are decoded into
// spans with their ids, parent, kind and attributes; a counting sink keeps none.
func TestSinkReceivesExport(t *testing.T) {
	for _, compression := range []otlptracehttp.Compression{otlptracehttp.NoCompression, otlptracehttp.GzipCompression} {
		for _, keep := range []bool{true, false} {
			sink := New(keep)
			srv := httptest.NewServer(sink)
			exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"), otlptracehttp.WithCompression(compression))
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			ctx, parent := tp.Tracer("t").Start(context.Background(), "parent")
			_, child := tp.Tracer("t").Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.Int("n", 7)))
			child.End()
			parent.End()
			if err := tp.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			srv.Close()
			if sink.Count() != 2 {
				t.Fatalf("compression %v: %d spans counted, want 2", compression, sink.Count())
			}
			spans := sink.Spans()
			if !keep {
				if len(spans) != 0 {
					t.Fatalf("a counting sink kept %d spans", len(spans))
				}
				continue
			}
			if len(spans) != 2 || spans[0].Name != "POST" || spans[0].Kind != 3 || spans[0].Attributes["n"] != "7" ||
				spans[0].ParentSpanID != spans[1].SpanID || spans[0].TraceID != child.SpanContext().TraceID().String() || spans[1].ParentSpanID != "" {
				t.Fatalf("compression %v: spans = %+v", compression, spans)
			}
		}
	}
}
