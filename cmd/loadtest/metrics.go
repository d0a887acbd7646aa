package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	promodel "github.com/prometheus/common/model"
)

// startsMetric counts the delivery workflows webhookd started, by who started them (label by:
// request, activity or sweeper). Builds before issue 10 do not export it.
const startsMetric = "webhookd_delivery_starts_total"

// startCounts is one scrape of startsMetric; ok is false when the stack does not export it.
type startCounts struct {
	ok                                 bool
	request, fanout, activity, sweeper float64
}

// scrapeStarts reads startsMetric from the API's /metrics. A stack without it (an older build, or
// no /metrics at all) gives ok false: the figures are then "n/a", not a failure.
func scrapeStarts(ctx context.Context, api string) startCounts {
	families := scrapeMetrics(ctx, api+"/metrics")
	if families[startsMetric] == nil {
		return startCounts{}
	}
	c := startCounts{ok: true}
	by := map[string]*float64{"request": &c.request, "fanout": &c.fanout, "activity": &c.activity, "sweeper": &c.sweeper}
	for _, m := range families[startsMetric].GetMetric() {
		for _, l := range m.GetLabel() {
			if v, ok := by[l.GetValue()]; ok && l.GetName() == "by" {
				*v = m.GetCounter().GetValue()
			}
		}
	}
	return c
}

// startDelta is who started the workflows of a scenario's deliveries: the difference between two
// scrapes of startsMetric.
type startDelta struct {
	ok                                 bool
	request, fanout, activity, sweeper int
}

func (d startDelta) total() int { return d.request + d.fanout + d.activity + d.sweeper }

// requestPath counts the starts the request made, itself or through the fan-out workflow it
// started (an event with many webhooks).
func (d startDelta) requestPath() int { return d.request + d.fanout }

// String is "request / sweeper", or n/a for a stack without the metric.
func (d startDelta) String() string {
	if !d.ok {
		return "n/a"
	}
	s := fmt.Sprintf("%d / %d", d.requestPath(), d.sweeper)
	if d.fanout != 0 {
		s += fmt.Sprintf(" (%d through the fan-out workflow)", d.fanout)
	}
	if d.activity != 0 {
		s += fmt.Sprintf(" (+%d by activities)", d.activity)
	}
	return s
}

// awaitStarts scrapes startsMetric after a scenario's deliveries arrived, until the difference
// from before counts want starts: the API counts a start just after Temporal accepted it, so a
// delivery may arrive a moment before its start is counted. It gives up after a few seconds and
// returns what it saw.
func awaitStarts(ctx context.Context, cfg config, before startCounts, want int) startDelta {
	if !before.ok {
		return startDelta{}
	}
	var d startDelta
	pollUntil(ctx, time.Now().Add(10*time.Second), cfg.progress, func() bool {
		after := scrapeStarts(ctx, cfg.api)
		d = startDelta{ok: after.ok, request: int(after.request - before.request), fanout: int(after.fanout - before.fanout),
			activity: int(after.activity - before.activity), sweeper: int(after.sweeper - before.sweeper)}
		return !d.ok || d.total() >= want
	}, func() { fmt.Printf("  waiting for %s to count %d starts: %d so far\n", startsMetric, want, d.total()) })
	return d
}

// attemptMetric is webhookd's histogram of delivery attempts' durations, from dial (or the
// broker's publish) to the end of the reply (or the broker's acknowledgement).
const attemptMetric = "webhookd_delivery_attempt_duration_seconds"

// attemptTime is one scrape of attemptMetric, summed over its labels; ok is false when the scrape
// failed.
type attemptTime struct {
	ok    bool
	sum   float64 // seconds
	count uint64
}

// scrapeAttemptTime reads attemptMetric from the API's /metrics; a failed scrape gives ok false.
func scrapeAttemptTime(ctx context.Context, api string) attemptTime {
	families := scrapeMetrics(ctx, api+"/metrics")
	if families == nil {
		return attemptTime{}
	}
	return attemptTimeOf(families)
}

// scrapeMetrics reads the Prometheus text at url; nil when it cannot (no such endpoint, an older
// build, a reply that does not parse).
func scrapeMetrics(ctx context.Context, url string) map[string]*dto.MetricFamily {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	return parseMetrics(resp.Body)
}

// parseMetrics parses Prometheus text; nil when it does not parse.
func parseMetrics(r io.Reader) map[string]*dto.MetricFamily {
	parser := expfmt.NewTextParser(promodel.LegacyValidation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil
	}
	return families
}

func parseAttemptTime(r io.Reader) attemptTime {
	families := parseMetrics(r)
	if families == nil {
		return attemptTime{}
	}
	return attemptTimeOf(families)
}

func attemptTimeOf(families map[string]*dto.MetricFamily) attemptTime {
	// Before its first attempt webhookd exports no sample of the histogram: none were made.
	t := attemptTime{ok: true}
	for _, m := range families[attemptMetric].GetMetric() {
		t.sum += m.GetHistogram().GetSampleSum()
		t.count += m.GetHistogram().GetSampleCount()
	}
	return t
}

// meanAttempt is the mean duration of the attempts made between two scrapes; 0 when either failed
// or none was made.
func meanAttempt(before, after attemptTime) time.Duration {
	if !before.ok || !after.ok || after.count <= before.count {
		return 0
	}
	return time.Duration((after.sum - before.sum) / float64(after.count-before.count) * float64(time.Second))
}
