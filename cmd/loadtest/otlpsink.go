package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/internal/otlpsink"
)

// serveOTLPSink serves a discarding OTLP/HTTP trace receiver at addr (-otlp-sink), where webhookd
// exports its spans when the benchmark runs it with tracing on (BENCH_TRACING): the cost of
// tracing is then measured with its export, and without a collector's CPU on the cores. finish
// waits until no span has arrived for longer than the exporter's default batch delay (5 s; at
// most 30 s), prints how many arrived, and stops it.
func serveOTLPSink(addr string) (finish func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-otlp-sink: %w", err)
	}
	sink := otlpsink.New(false)
	srv := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("otlp sink:", err)
		}
	}()
	return func() {
		const quiet = 6 * time.Second
		last, changed := sink.Count(), time.Now()
		for deadline := time.Now().Add(30 * time.Second); time.Since(changed) < quiet && time.Now().Before(deadline); {
			time.Sleep(500 * time.Millisecond)
			if n := sink.Count(); n != last {
				last, changed = n, time.Now()
			}
		}
		// Right after the scenario's last paragraph, which the bench scripts print as its result.
		fmt.Printf("spans received by the OTLP sink at %s: %d\n", addr, sink.Count())
		_ = srv.Close()
	}, nil
}
