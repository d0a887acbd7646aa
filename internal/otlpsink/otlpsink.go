// Package otlpsink is an OTLP/HTTP trace receiver in the process that needs one: the system test
// that checks an event's trace (e2e/tracing_test.go) keeps what it receives, and the benchmark
// (cmd/loadtest -otlp-sink) only counts it, so that tracing's cost is measured with its export and
// without a collector's own CPU on the machine.
package otlpsink

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in hex as in a traceparent.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Kind is OTLP's: 1 internal, 2 server, 3 client.
	Kind int32
	// Attributes are the span's, each value as text; Resource are its resource's.
	Attributes, Resource map[string]string
	// Events are the attributes of the span's events (such as a recorded error), as name=value.
	Events []string
}

// Sink answers POST /v1/traces with a protobuf ExportTraceServiceRequest, plain or gzip, as the
// OTLP/HTTP exporters send it (OTEL_EXPORTER_OTLP_ENDPOINT=http://<its address>). It counts every
// span and, made with keep, keeps them.
type Sink struct {
	keep  bool
	count atomic.Int64
	mu    sync.Mutex
	spans []Span
}

// New makes a Sink; keep makes it keep the spans it receives, not only count them.
func New(keep bool) *Sink { return &Sink{keep: keep} }

// Count is how many spans were received.
func (s *Sink) Count() int64 { return s.count.Load() }

// Spans are the spans received so far (none unless made with keep).
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	n := 0
	for _, rs := range req.GetResourceSpans() {
		resource := attributes(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				n++
				if !s.keep {
					continue
				}
				span := Span{
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(), Kind: int32(sp.GetKind()),
					Attributes: attributes(sp.GetAttributes()), Resource: resource,
				}
				for _, ev := range sp.GetEvents() {
					for k, v := range attributes(ev.GetAttributes()) {
						span.Events = append(span.Events, k+"="+v)
					}
				}
				got = append(got, span)
			}
		}
	}
	s.count.Add(int64(n))
	if s.keep {
		s.mu.Lock()
		s.spans = append(s.spans, got...)
		s.mu.Unlock()
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{}) // an empty message always marshals
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attributes(kvs []*common.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = text(kv.GetValue())
	}
	return m
}

func text(v *common.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *common.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *common.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	default:
		return fmt.Sprint(v.GetValue())
	}
}
