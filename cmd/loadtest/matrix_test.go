package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWriteMatrixTable(t *testing.T) {
	ms := func(n int) obs { return obs{d: time.Duration(n) * time.Millisecond} }
	phase := func(p50, max, apiP50, apiMax obs, apiFailed int) cPhase {
		return cPhase{receipts: summary{events: 10, p50: p50, max: max}, api: summary{events: 20, p50: apiP50, max: apiMax}, apiFailed: apiFailed}
	}
	withRSS := func(p cPhase, rss int64) cPhase { p.rss = rss; return p }
	late := obs{d: 90500 * time.Millisecond, lowerBound: true}
	results := []matrixResult{
		{name: "burst", load: "a burst of 2000 events", idle: withRSS(phase(ms(10), ms(40), ms(5), ms(20), 0), 80e6),
			during: withRSS(phase(ms(25), ms(200), ms(15), ms(100), 0), 95e6), failed: "0", idleFailed: "0", work: "2000 publishes | all"},
		{name: "sharedhost-tls", load: "10 webhooks without a certificate", idle: phase(ms(10), ms(20), ms(5), ms(10), 0),
			during: phase(late, late, ms(5), ms(40), 2), failed: "10 (circuit_open 10)", idleFailed: "1 (timeout 1)", work: "60 publishes"},
		{name: "lists", load: "6 readers", err: errors.New("account B:\n422 limit_exceeded")},
	}
	cfg := config{probes: 10, probeEvery: 300 * time.Millisecond, timeout: 90 * time.Second}
	var out strings.Builder
	if err := writeMatrixTable(&out, cfg, results); err != nil {
		t.Fatal(err)
	}
	want := "\nnoisy neighbours: account C's publish-to-receipt and API answer times (POST /events and GET /webhooks, 10 of each per phase, one every 300ms), " +
		"with B idle, then during B's load, times in seconds; ratio: during over idle, of p50 / of max; ≥: not arrived within 1m30s\n" +
		"| row | B's load | C receipt idle p50 / max | during p50 / max | ratio | C API idle p50 / max | during p50 / max | ratio | C failed attempts | webhookd peak RSS idle / during | what B did |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|\n" +
		"| burst | a burst of 2000 events | 0.010 / 0.040 | 0.025 / 0.200 | 2.5x / 5.0x | 0.005 / 0.020 | 0.015 / 0.100 | 3.0x / 5.0x | 0 | 80 MB / 95 MB | 2000 publishes / all |\n" +
		"| sharedhost-tls | 10 webhooks without a certificate | 0.010 / 0.020 | ≥ 90.500 / ≥ 90.500 | ≥ 9050.0x / ≥ 4525.0x | 0.005 / 0.010 | 0.005 / 0.040 (2 failed) | 1.0x / 4.0x | 10 (circuit_open 10) | - | 60 publishes |\n" +
		"| lists | 6 readers | - | - | - | - | - | - | - | - | not measured: account B: 422 limit_exceeded |\n" +
		"sharedhost-tls: C had 1 (timeout 1) failed attempts with B idle\n"
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestRatiosOfPhases(t *testing.T) {
	s := func(p50, max time.Duration, bound bool) summary {
		return summary{events: 10, p50: obs{d: p50}, max: obs{d: max, lowerBound: bound}}
	}
	tests := []struct {
		name         string
		during, idle summary
		want         string
	}{
		{"slower", s(20*time.Millisecond, 90*time.Millisecond, false), s(10*time.Millisecond, 30*time.Millisecond, false), "2.0x / 3.0x"},
		{"faster", s(5*time.Millisecond, 15*time.Millisecond, false), s(10*time.Millisecond, 30*time.Millisecond, false), "0.5x / 0.5x"},
		{"a delivery missing during", s(20*time.Millisecond, 60*time.Second, true), s(10*time.Millisecond, 30*time.Millisecond, false), "2.0x / ≥ 2000.0x"},
		{"no events during", summary{}, s(10*time.Millisecond, 30*time.Millisecond, false), "-"},
	}
	for _, tt := range tests {
		if got := ratios(tt.during, tt.idle); got != tt.want {
			t.Errorf("%s: ratios = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The heavy filter must fit the API's limit, and every test must fail against a run of one letter
// (so that each reads the whole name), and the filter must grow its strings no shorter than it has
// to.
func TestHeavyFilter(t *testing.T) {
	raw, err := heavyFilter(150, filterMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > filterMaxBytes || len(raw) < filterMaxBytes-200 {
		t.Errorf("filter of %d bytes, want at most %d and close to it", len(raw), filterMaxBytes)
	}
	var f struct {
		Data struct {
			Name struct {
				Or []struct {
					In string `json:"$in"`
				} `json:"$or"`
			} `json:"name"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("filter %s: %v", raw, err)
	}
	if n := len(f.Data.Name.Or); n != 150 {
		t.Fatalf("%d tests, want 150", n)
	}
	name := strings.Repeat("a", 10000)
	for _, test := range f.Data.Name.Or {
		if strings.Contains(name, test.In) || !strings.HasPrefix(test.In, "aaaaaaaa") {
			t.Errorf("test %q: want a run of a that a name of a alone does not contain", test.In)
		}
	}
	if _, err := heavyFilter(1000, filterMaxBytes); err == nil {
		t.Error("1000 tests fit in 4 KiB")
	}
}

func TestBigCampaignIsTheEventSizeAsked(t *testing.T) {
	for _, kib := range []int{1, 250, 256} {
		data, err := bigCampaign("campaign.processing", kib)
		if err != nil {
			t.Fatalf("%d KiB: %v", kib, err)
		}
		body, err := json.Marshal(map[string]any{"eventType": "campaign.processing", "data": data})
		if err != nil {
			t.Fatal(err)
		}
		if len(body) != kib<<10 {
			t.Errorf("%d KiB: a body of %d bytes, want %d", kib, len(body), kib<<10)
		}
	}
	if _, err := bigCampaign("campaign.processing", 257); err == nil {
		t.Error("257 KiB: want an error, the API refuses it")
	}
}

func TestNextLink(t *testing.T) {
	tests := []struct{ header, want string }{
		{`</api/svc/v2/events?after=200&limit=200>; rel="next"`, "/api/svc/v2/events?after=200&limit=200"},
		{`</a?x=1>; rel="prev", </b?x=2>; rel="next"`, "/b?x=2"},
		{`</a>; rel = "next"`, "/a"},
		{`</a>; rel="prev"`, ""},
		{"", ""},
		{`garbage; rel="next"`, ""},
	}
	for _, tt := range tests {
		if got := nextLink(tt.header); got != tt.want {
			t.Errorf("nextLink(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

func TestParseMatrixRows(t *testing.T) {
	all, err := parseMatrixRows("all")
	if err != nil || len(all) != len(matrixRows) || all[0] != "sharedhost-hang" {
		t.Errorf("all: %v, %v", all, err)
	}
	if got, err := parseMatrixRows("burst, portal"); err != nil || strings.Join(got, ",") != "burst,portal" {
		t.Errorf("two rows: %v, %v", got, err)
	}
	if _, err := parseMatrixRows("burst,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an unknown row: %v", err)
	}
}

func TestOpCountTellsFailuresFromOperationsCutShort(t *testing.T) {
	c := &opCount{what: "publishes"}
	ctx, stop := context.WithCancel(context.Background())
	start := time.Now()
	c.record(ctx, start, nil)
	c.record(ctx, start, errors.New("503 busy"))
	stop()
	c.record(ctx, start, context.Canceled)
	c.setNote("queued %d", 7)
	got := c.String()
	for _, want := range []string{"2 publishes (p50 ", ", 1 failed (last: 503 busy), 1 cut short when B stopped; queued 7"} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, want it to contain %q", got, want)
		}
	}
	if err := c.err(); err == nil || !strings.Contains(err.Error(), "1 of 2 publishes failed") {
		t.Errorf("err() = %v", err)
	}
}
