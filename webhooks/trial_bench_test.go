package webhooks_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
)

// BenchmarkHostileTrials (issue 40) runs six filter trials at once, each of limit 1,000, over
// accounts that store 1,000 events of 250 KiB each (the hostile call), on SQLite: six trials
// of one account ("one-account"), and one trial each of six accounts ("six-accounts", which the
// per-account cap does not refuse). Beside ns/op it reports, for the six trials together, the
// process's RSS before them and its peak during them (VmHWM, reset before them), the peak of heap
// objects (sampled every 5 ms), the CPU time (user and system), and how many trials were admitted
// and refused:
//
//	go test -run '^$' -bench HostileTrials -benchtime 1x -benchmem ./webhooks/
//
// Storing the events takes most of its time (1.5 GB for six accounts).
func BenchmarkHostileTrials(b *testing.B) {
	const events, size, trials = 1000, 250 << 10, 6
	for _, c := range []struct {
		name     string
		accounts int
	}{{"one-account", 1}, {"six-accounts", trials}} {
		b.Run(c.name, func(b *testing.B) {
			db := dbtest.SQLite(b)
			s := newService(b, db, 10)
			scopes := make([]model.WebhookScope, c.accounts)
			data := `{"pad":"` + strings.Repeat("x", size-10) + `"}`
			for i := range scopes {
				_, account, err := model.CreateAPIKey(b.Context(), db, fmt.Sprintf("hostile%d@example.com", i), "bench")
				if err != nil {
					b.Fatal(err)
				}
				scopes[i] = model.WebhookScope{AccountID: account.ID, Variant: model.VariantA}
				for range events {
					if _, err := model.InsertEvent(b.Context(), db, model.NewEvent{AccountID: account.ID, Variant: model.VariantA, EventType: "campaign.created", Data: data}); err != nil {
						b.Fatal(err)
					}
				}
			}
			var rssBefore, peakRSS, peakHeap uint64
			var cpu time.Duration
			var admitted, refused int
			b.ResetTimer()
			for range b.N {
				runtime.GC()
				resetPeakRSS()
				rssBefore = max(rssBefore, procStatus(b, "VmRSS:"))
				stop := sampleHeap()
				cpuBefore := cpuTime(b)
				var wg sync.WaitGroup
				errs := make([]error, trials)
				for i := range trials {
					wg.Go(func() {
						_, errs[i] = s.TryFilter(context.Background(), scopes[i%len(scopes)], passAll, "campaign.created", webhooks.MaxTrialEvents)
					})
				}
				wg.Wait()
				cpu += cpuTime(b) - cpuBefore
				peakHeap = max(peakHeap, stop())
				peakRSS = max(peakRSS, procStatus(b, "VmHWM:"))
				for _, err := range errs {
					var busy *webhooks.BusyError
					switch {
					case err == nil:
						admitted++
					case errors.As(err, &busy):
						refused++
					default:
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(rssBefore)/(1<<20), "RSS-before-MiB")
			b.ReportMetric(float64(peakRSS)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "CPU-s/op")
			b.ReportMetric(float64(admitted)/float64(b.N), "admitted/op")
			b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
		})
	}
}

// sampleHeap samples the bytes of heap objects (live, or dead and not yet swept) every 5 ms until
// stop, which returns the most it saw.
func sampleHeap() (stop func() uint64) {
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var most uint64
		for {
			metrics.Read(sample)
			most = max(most, sample[0].Value.Uint64())
			select {
			case <-done:
				peak <- most
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peak
	}
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux: clear_refs 5); where it cannot,
// the peak is the process's since it started.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procStatus is a size of /proc/self/status in bytes: VmRSS:, the resident set, or VmHWM:, its
// peak.
func procStatus(b *testing.B, field string) uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
