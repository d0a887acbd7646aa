// Command loadtest measures how many deliveries per second a running webhookd stack sustains: it
// serves a fast HTTPS receiver, registers one webhook, publishes N events through the API as fast as
// it can, and reports the time from the first publish to the last delivery received.
//
// The stack must trust the receiver's certificate and allow a loopback receiver, so the first run
// writes the certificate and tells how to start the stack:
//
//	go run ./cmd/loadtest -init
//	WEBHOOKD_EXTRA_CA_FILE=.data/loadtest-cert.pem WEBHOOKD_ALLOW_PRIVATE_TARGETS=true make run
//	go run ./cmd/loadtest -key whk_... -events 1000
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run() error {
	api := flag.String("api", "http://127.0.0.1:8080", "webhookd API base URL")
	key := flag.String("key", "", "API key (printed by make run)")
	events := flag.Int("events", 1000, "events to publish")
	concurrency := flag.Int("concurrency", 16, "concurrent publishers")
	listen := flag.String("listen", "127.0.0.1:9443", "receiver address")
	certFile := flag.String("cert", ".data/loadtest-cert.pem", "receiver certificate (give it to the stack as WEBHOOKD_EXTRA_CA_FILE)")
	keyFile := flag.String("cert-key", ".data/loadtest-key.pem", "receiver private key")
	initOnly := flag.Bool("init", false, "only write the receiver certificate, then exit")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()

	if _, err := os.Stat(*certFile); errors.Is(err, os.ErrNotExist) || *initOnly {
		if err := writeCert(*certFile, *keyFile); err != nil {
			return err
		}
		fmt.Printf("wrote %s; start the stack with:\n  WEBHOOKD_EXTRA_CA_FILE=%s WEBHOOKD_ALLOW_PRIVATE_TARGETS=true make run\n", *certFile, *certFile)
		if *initOnly {
			return nil
		}
	}
	if *key == "" {
		return errors.New("-key is required (make run prints one)")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return err
	}

	var received atomic.Int64
	var mu sync.Mutex
	var last time.Time
	done := make(chan struct{})
	target := int64(*events)
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.Header.Get("X-Service-Event") != "campaign.created" {
				return
			}
			n := received.Add(1)
			mu.Lock()
			last = time.Now()
			mu.Unlock()
			if n == target {
				close(done)
			}
		}),
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency}}
	call := func(method, path string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, *api+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", *key)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("%s %s: %d", method, path, resp.StatusCode)
		}
		if resp.StatusCode >= 300 {
			return out, fmt.Errorf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out, nil
	}
	hook, err := call("POST", "/api/svc/v2/webhooks", map[string]string{"url": "https://" + ln.Addr().String() + "/hook", "eventType": "campaign.created"})
	if err != nil {
		return fmt.Errorf("register the receiver: %w", err)
	}
	hookID := hook["data"].(map[string]any)["id"]
	defer func() { _, _ = call("DELETE", fmt.Sprintf("/api/svc/v2/webhooks/%v", hookID), nil) }()

	data := map[string]any{"id": 1, "name": "Load", "platform": "meta", "status": "active",
		"startDate": "2026-01-01T00:00:00.000Z", "endDate": "2026-12-31T00:00:00.000Z", "budget": 100}
	var latencies []time.Duration
	var latMu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	var publishErr atomic.Value
	start := time.Now()
	for i := 0; i < *concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				t0 := time.Now()
				if _, err := call("POST", "/api/svc/v2/events", map[string]any{"eventType": "campaign.created", "data": data}); err != nil {
					publishErr.Store(err)
					continue
				}
				latMu.Lock()
				latencies = append(latencies, time.Since(t0))
				latMu.Unlock()
			}
		}()
	}
	for i := 0; i < *events; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	published := time.Since(start)
	if err, _ := publishErr.Load().(error); err != nil {
		return fmt.Errorf("publish: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("only %d of %d deliveries arrived within %s", received.Load(), *events, *timeout)
	}
	mu.Lock()
	total := last.Sub(start)
	mu.Unlock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	fmt.Printf("events: %d, publish concurrency: %d\n", *events, *concurrency)
	fmt.Printf("intake:     %.0f events/s (%s), publish latency p50 %s p99 %s\n",
		float64(*events)/published.Seconds(), published.Round(time.Millisecond),
		latencies[len(latencies)/2].Round(time.Microsecond), latencies[len(latencies)*99/100].Round(time.Microsecond))
	fmt.Printf("deliveries: %.0f deliveries/s (first publish to last delivery: %s)\n", float64(*events)/total.Seconds(), total.Round(time.Millisecond))
	return nil
}

// writeCert makes a self-signed certificate for 127.0.0.1 and localhost.
func writeCert(certFile, keyFile string) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "webhookd loadtest receiver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(".data", 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
