package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestReceiptBookRefusesAFlakyEndpointsFirstRequestOnly(t *testing.T) {
	book := newReceiptBook(0)
	post := func(path, id string) int {
		req := httptest.NewRequest(http.MethodPost, path, nil)
		req.Header.Set("Webhook-Id", id)
		rec := httptest.NewRecorder()
		book.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, step := range []struct {
		path, id string
		want     int
	}{
		{"/flaky/c", "msg_1_3", http.StatusServiceUnavailable},
		{"/flaky/c", "msg_1_3", http.StatusOK},
		{"/flaky/c", "msg_1_3", http.StatusOK},
		{"/flaky/c", "msg_2_3", http.StatusServiceUnavailable},
		{"/ok/c/plain", "msg_1_2", http.StatusOK},
	} {
		if got := post(step.path, step.id); got != step.want {
			t.Errorf("%s %s: %d, want %d", step.path, step.id, got, step.want)
		}
	}
	got := book.snapshot()
	want := map[string]tally{"msg_1_3": {ok: 2, refused: 1}, "msg_2_3": {refused: 1}, "msg_1_2": {ok: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tallies %v, want %v", got, want)
	}
}

func TestReceiptBookCountsARequestCutOffBeforeItsAnswer(t *testing.T) {
	book := newReceiptBook(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/ok/b/plain", nil)
	req.Header.Set("Webhook-Id", "msg_7_5")
	done := make(chan struct{})
	go func() {
		book.ServeHTTP(httptest.NewRecorder(), req)
		close(done)
	}()
	cancel() // webhookd died with the request open
	<-done
	if got := book.snapshot()["msg_7_5"]; got != (tally{cut: 1}) {
		t.Errorf("tally %+v, want one cut off and none answered", got)
	}
}

func TestCountKill(t *testing.T) {
	c := &killAccount{name: "C", hooks: []killHook{{id: 1}, {id: 2}}, accepted: []int64{10, 11}}
	b := &killAccount{name: "B", hooks: []killHook{{id: 3}}, accepted: []int64{12}, unmatched: 1}
	receipts := map[string]tally{
		"msg_10_1": {ok: 1},
		"msg_10_2": {ok: 2, cut: 1},     // arrived twice: its first 2xx came as webhookd died
		"msg_11_1": {refused: 1, ok: 1}, // a flaky endpoint's retry
		"msg_11_2": {cut: 1},            // missing: cut off, never answered
		// msg_12_3 missing: never arrived
		"msg_13_1": {ok: 1}, // event 13 got no 202 (in flight at the kill)
		"msg_13_2": {ok: 1},
		"msg_9_99": {ok: 1}, // not one of the scenario's webhooks
		"":         {ok: 1}, // no Webhook-Id
	}
	got := countKill([]*killAccount{c, b}, receipts)
	want := killCount{accepted: 3, expected: 5, delivered: 3, unmatched: 1, missing: []string{"msg_11_2", "msg_12_3"},
		twice: 1, unacknowledged: 2, unacknowledgedEvents: 1, foreign: 2, refused: 1, cut: 2, resent: 1}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("countKill\n got %+v\nwant %+v", got, want)
	}
}

func TestParseMessageIDInvertsMessageID(t *testing.T) {
	if ev, hook, ok := parseMessageID(messageID(123, 45)); !ok || ev != 123 || hook != 45 {
		t.Errorf("parseMessageID(messageID(123, 45)) = %d, %d, %t", ev, hook, ok)
	}
	for _, bad := range []string{"", "msg_", "msg_1", "msg_a_2", "evt_1_2", "msg_1_2x"} {
		if _, _, ok := parseMessageID(bad); ok {
			t.Errorf("parseMessageID(%q) ok, want not", bad)
		}
	}
}

func TestPublishErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&statusError{status: 503}, "HTTP 503"},
		{fmt.Errorf("post: %w", syscall.ECONNREFUSED), "connection refused"},
		{fmt.Errorf("post: %w", syscall.ECONNRESET), "connection reset"},
		{fmt.Errorf("post: %w", io.EOF), "EOF"},
		{errors.New("boom"), "other (boom)"},
	} {
		if got := publishErrorClass(tc.err); got != tc.want {
			t.Errorf("publishErrorClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestLifeLogKeepsTheLastScrapeOfEachProcess(t *testing.T) {
	l := &lifeLog{}
	l.add(scrape{started: 1, counters: map[string]float64{waitsMetric + " rate_limit": 3}}, true)
	l.add(scrape{started: 1, counters: map[string]float64{waitsMetric + " rate_limit": 9}}, true)
	l.add(scrape{}, false) // webhookd down
	l.add(scrape{started: 2, counters: map[string]float64{waitsMetric + " rate_limit": 1}}, true)
	var got []float64
	for _, s := range l.lives {
		got = append(got, s.counters[waitsMetric+" rate_limit"])
	}
	if !slices.Equal(got, []float64{9, 1}) {
		t.Errorf("last rate_limit per process %v, want [9 1]", got)
	}
}
