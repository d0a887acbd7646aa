package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testReceiver serves h like a scenario does and returns a client that trusts it, as webhookd
// does (HTTP/2 included).
func testReceiver(t *testing.T, h http.Handler) (string, func(), *http.Client) {
	t.Helper()
	cert, certFile := testCert(t)
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	addr, stop, err := serveTLS("127.0.0.1:0", cert, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	return "https://" + addr, stop, client
}

// waitHeld polls until the hanging receiver holds want requests.
func waitHeld(t *testing.T, h *hangingReceiver, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); h.held.Load() != want; {
		if time.Now().After(deadline) {
			t.Fatalf("hanging receiver holds %d requests, want %d", h.held.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHangingReceiverReleasesAGoneClient(t *testing.T) {
	h := &hangingReceiver{}
	url, _, client := testReceiver(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hook", strings.NewReader(`{"a":1}`))
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the hanging receiver answered %d", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the client's deadline", err)
	}
	waitHeld(t, h, 0)
	if got := h.total.Load(); got != 1 {
		t.Fatalf("received %d requests, want 1", got)
	}
}

func TestHangingReceiverNeverAnswersEvenWhenStopped(t *testing.T) {
	h := &hangingReceiver{}
	url, stop, client := testReceiver(t, h)
	result := make(chan error, 1)
	go func() {
		resp, err := client.Post(url+"/hook", "application/json", strings.NewReader(`{}`))
		if err != nil {
			result <- nil // the connection ended without an answer, as it should
			return
		}
		resp.Body.Close()
		result <- fmt.Errorf("the stopping receiver answered %s", resp.Status)
	}()
	waitHeld(t, h, 1)
	stop()
	select {
	case err := <-result:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the client still waits after the receiver stopped")
	}
	waitHeld(t, h, 0)
}

func TestArrivalsRecordTheFirstArrivalByWebhookID(t *testing.T) {
	a := newArrivals()
	url, _, client := testReceiver(t, a)
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/hook", strings.NewReader(`{}`))
		req.Header.Set("Webhook-Id", messageID(7, 3))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d, want 204", resp.StatusCode)
		}
	}
	before := time.Now()
	post()
	first, ok := a.arrived("msg_7_3")
	if !ok || first.Before(before) {
		t.Fatalf("arrived = %v, %v; want a time after %v", first, ok, before)
	}
	post() // a retry of the same delivery keeps the first arrival
	if again, _ := a.arrived("msg_7_3"); !again.Equal(first) {
		t.Fatalf("a second arrival moved the time from %v to %v", first, again)
	}
	if _, ok := a.arrived(messageID(7, 4)); ok {
		t.Fatal("a delivery to another webhook counts as arrived")
	}
}

// testCert writes a loadtest certificate as -init does and returns it with its file.
func testCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := writeCert(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certFile
}
