package tracing

import (
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TemporalInterceptor is the Temporal SDK's tracing interceptor on this provider. Set on the
// client's options, it also intercepts every worker built from that client, so one trace holds:
// StartWorkflow:<type> (the client's start, under the request's span when started with the
// request's context), RunWorkflow:<type>, StartActivity:<name> and RunActivity:<name> for every
// activity, local ones included (a delivery's first attempt). The span travels in the workflow's
// and the activities' Temporal headers (_tracer-data). A span is no command: it changes nothing in
// a history, so determinism and replay are untouched. Start spans are skipped while a workflow
// replays, but RunWorkflow is not: a delivery evicted from the worker's cache between attempts
// gets a second RunWorkflow span when it replays for its next attempt.
func (t *Tracing) TemporalInterceptor() (interceptor.Interceptor, error) {
	return opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{
		Tracer:            t.provider.Tracer("go.temporal.io/sdk"),
		TextMapPropagator: propagator,
	})
}
