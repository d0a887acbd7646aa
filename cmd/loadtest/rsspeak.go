package main

import (
	"sync"
	"sync/atomic"
	"time"
)

// rssPeak samples a process's resident memory (/proc VmRSS) every rssEvery until stopped, and
// keeps the largest: the matrix's "peak RSS" of webhookd per phase, where a heavy thing of B's
// (a replay of many deliveries) must not grow webhookd's memory with its size.
type rssPeak struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

const rssEvery = 100 * time.Millisecond

// watchRSS starts sampling pid; a pid of 0 samples nothing (Peak answers 0).
func watchRSS(pid int) *rssPeak {
	p := &rssPeak{stop: make(chan struct{})}
	if pid <= 0 {
		return p
	}
	sample := func() {
		if b, err := readRSS(pid); err == nil && b > p.peak.Load() {
			p.peak.Store(b)
		}
	}
	sample()
	p.wg.Go(func() {
		t := time.NewTicker(rssEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	})
	return p
}

// Stop ends the sampling and returns the largest RSS seen, in bytes (0: none read).
func (p *rssPeak) Stop() int64 {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
	return p.peak.Load()
}
