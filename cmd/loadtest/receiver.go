package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// serveTLS serves h on addr with the loadtest certificate. It returns the bound address and a
// function that stops the server. Every request's context ends when the client goes away or the
// server stops, so a handler that waits on it cannot outlive either.
func serveTLS(addr string, cert tls.Certificate, h http.Handler) (string, func(), error) {
	return serveTLSConfig(addr, &tls.Config{Certificates: []tls.Certificate{cert}}, h, nil)
}

// serveTLSConfig is serveTLS with a TLS configuration of its own (a receiver that asks for client
// certificates), and errorLog for the server's errors, such as refused handshakes; nil is the
// standard logger.
func serveTLSConfig(addr string, tlsConfig *tls.Config, h http.Handler, errorLog *log.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          errorLog,
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "loadtest: receiver %s: %v\n", ln.Addr(), err)
		}
	}()
	// Close before cancel: a handler that returns writes a 200, and a hanging receiver must not
	// answer even as it stops. Once the connections are closed, nothing reaches the client.
	stop := func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "loadtest: stop receiver %s: %v\n", ln.Addr(), err)
		}
		cancel()
	}
	return ln.Addr().String(), stop, nil
}

// messageID is the Webhook-Id header webhookd sends with the delivery of an event to a webhook
// (wire.MessageID); it names a delivery exactly, retries included.
func messageID(eventID, webhookID int64) string {
	return "msg_" + strconv.FormatInt(eventID, 10) + "_" + strconv.FormatInt(webhookID, 10)
}

// arrivals is a healthy receiver: it answers 204 at once and records when each delivery first
// arrived, by Webhook-Id. A delivery may arrive before its POST /events returns (webhookd starts
// deliveries before it answers), so arrivals are matched to publishes afterwards, not on arrival.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newArrivals() *arrivals {
	return &arrivals{at: make(map[string]time.Time)}
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The arrival is what matters: when the headers came (the body's transfer is not webhookd's
	// delay), not the body itself.
	now := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	if id := r.Header.Get("Webhook-Id"); id != "" {
		a.mu.Lock()
		if _, seen := a.at[id]; !seen {
			a.at[id] = now
		}
		a.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// arrived returns when the delivery with this Webhook-Id first arrived.
func (a *arrivals) arrived(msgID string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[msgID]
	return t, ok
}

// hangingReceiver accepts the connection and reads the request, then never answers: the
// application behind it is stuck. It holds each request until the client gives up (webhookd's
// attempt timeout) or the server stops, so it holds no more goroutines than the client has
// requests open. With fast set it answers 204 at once instead: the same traffic without the hang,
// to tell what the hang costs from what the traffic costs.
type hangingReceiver struct {
	fast     atomic.Bool
	held     atomic.Int64 // requests being held now
	total    atomic.Int64 // requests held so far
	answered atomic.Int64 // requests answered while fast
}

func (h *hangingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // the arrival is what matters, not the body
	if h.fast.Load() {
		h.answered.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.total.Add(1)
	h.held.Add(1)
	defer h.held.Add(-1)
	<-r.Context().Done()
}

// String is the receiver's state for progress lines.
func (h *hangingReceiver) String() string {
	if h.fast.Load() {
		return fmt.Sprintf("B's receiver answered %d requests", h.answered.Load())
	}
	return fmt.Sprintf("hanging receiver holds %d requests (%d so far)", h.held.Load(), h.total.Load())
}
