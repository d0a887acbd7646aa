package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The Temporal server counts each call to its stores by operation (issue 45: where a delivery's
// cost in the server and its database goes). Its own store's calls are persistence_requests, its
// visibility store's visibility_persistence_requests; both carry the operation label.
var persistenceMetrics = []string{"persistence_requests", "visibility_persistence_requests"}

// persistenceOps is one scrape: the count of each store operation, "visibility:" before those of
// the visibility store.
type persistenceOps map[string]float64

// scrapePersistence reads the server's metrics at url; nil when it cannot.
func scrapePersistence(ctx context.Context, url string) persistenceOps {
	if url == "" {
		return nil
	}
	return persistenceOf(scrapeMetrics(ctx, url))
}

func parsePersistence(r io.Reader) persistenceOps { return persistenceOf(parseMetrics(r)) }

// persistenceOf sums the store operations' counters by operation; nil without metrics.
func persistenceOf(families map[string]*dto.MetricFamily) persistenceOps {
	if families == nil {
		return nil
	}
	ops := persistenceOps{}
	for _, name := range persistenceMetrics {
		prefix := ""
		if strings.HasPrefix(name, "visibility_") {
			prefix = "visibility:"
		}
		for _, m := range families[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					ops[prefix+l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return ops
}

// persistencePerDelivery is the store operations made between two scrapes, per delivery, largest
// first: "UpdateWorkflowExecution 2.01, ... (all 9.87)"; "" when either scrape failed.
func persistencePerDelivery(before, after persistenceOps, n int) string {
	if before == nil || after == nil || n == 0 {
		return ""
	}
	type op struct {
		name string
		per  float64
	}
	var ops []op
	var all float64
	for name, v := range after {
		if d := (v - before[name]) / float64(n); d >= 0.005 {
			ops = append(ops, op{name, d})
			all += d
		}
	}
	slices.SortFunc(ops, func(a, b op) int {
		if a.per != b.per {
			if a.per > b.per {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = fmt.Sprintf("%s %.2f", o.name, o.per)
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" (all %.2f)", all)
}

// settle waits, after a tier's last delivery arrived, until the watched server processes are
// quiet (together under a tenth of a core over half a second), for at most 15 s: what a delivery
// costs after its receipt (the attempt's record, the workflow's completion, the visibility
// store's records) belongs to its tier, not to the next one.
func settle(ctx context.Context, procs []cpuProcess) {
	const every, quiet = 500 * time.Millisecond, 50 * time.Millisecond
	var server []cpuProcess
	for _, p := range procs {
		if len(p.pids) > 0 {
			server = append(server, cpuProcess{name: p.name, pids: p.pids})
		}
	}
	if len(server) == 0 {
		return
	}
	last := readCPU(server)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		now := readCPU(server)
		var spent time.Duration
		for name, d := range now {
			spent += d - last[name]
		}
		if spent < quiet {
			return
		}
		last = now
	}
}

// orNA is s, or "n/a" when it is empty.
func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}
