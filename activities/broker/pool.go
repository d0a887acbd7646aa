package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Pool keeps one Publisher per webhook with a destination, in one worker process, so that an
// attempt reuses the connection of the one before. A webhook's publisher is its own: no account
// shares another's connection, credentials or broker state (docs/architecture.md, "Shared
// resources"). A publisher is closed when its webhook changes (the next attempt finds another
// version and opens a new one) or is deleted (Run's sweep), and when it was idle for IdleTimeout.
type Pool struct {
	// Open opens a Publisher for a target (Open, by the destination's type).
	Open func(ctx context.Context, t Target) (Publisher, error)
	// Live reads which of the webhooks ids are live, with the version of each (its updated_at):
	// Run closes the publishers of the others.
	Live func(ctx context.Context, ids []int64) (map[int64]time.Time, error)
	// IdleTimeout closes a publisher unused for this long; zero takes DefaultIdleTimeout.
	IdleTimeout time.Duration
	Log         *slog.Logger

	mu      sync.Mutex
	entries map[int64]*entry
}

// DefaultIdleTimeout is how long an unused publisher stays open.
const DefaultIdleTimeout = 5 * time.Minute

// sweepEvery is how often Run looks for publishers to close.
const sweepEvery = 30 * time.Second

type entry struct {
	version time.Time
	pub     Publisher
	used    time.Time
	// ready is closed once pub (or err) is set: concurrent attempts of one webhook open one
	// publisher.
	ready chan struct{}
	err   error
}

// Get returns the publisher of webhook id at version, opening it with target when the pool has none
// of that version; one of an older version is closed.
func (p *Pool) Get(ctx context.Context, id int64, version time.Time, target func() Target) (Publisher, error) {
	p.mu.Lock()
	if p.entries == nil {
		p.entries = make(map[int64]*entry)
	}
	e := p.entries[id]
	if e != nil && !e.version.Equal(version) {
		delete(p.entries, id)
		go p.close(e)
		e = nil
	}
	if e == nil {
		e = &entry{version: version, ready: make(chan struct{})}
		p.entries[id] = e
		p.mu.Unlock()
		e.pub, e.err = p.Open(ctx, target())
		p.mu.Lock()
		if e.err != nil && p.entries[id] == e {
			delete(p.entries, id)
		}
		close(e.ready)
	}
	e.used = time.Now()
	p.mu.Unlock()
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.pub, e.err
}

// Run sweeps the pool until ctx ends, then closes every publisher.
func (p *Pool) Run(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.Close()
			return
		case <-t.C:
			p.Sweep(ctx)
		}
	}
}

// Sweep closes the publishers of webhooks deleted or changed, and those idle too long.
func (p *Pool) Sweep(ctx context.Context) {
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	p.mu.Lock()
	ids := make([]int64, 0, len(p.entries))
	for id := range p.entries {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	var live map[int64]time.Time
	if p.Live != nil {
		var err error
		if live, err = p.Live(ctx, ids); err != nil {
			if p.Log != nil {
				p.Log.Warn("broker pool: cannot read which webhooks are live; only idle publishers are closed", "err", err)
			}
			live = nil
		}
	}
	now := time.Now()
	var closing []*entry
	p.mu.Lock()
	for id, e := range p.entries {
		v, ok := live[id]
		gone := live != nil && (!ok || !v.Equal(e.version))
		select {
		case <-e.ready:
		default:
			continue // still opening
		}
		if gone || now.Sub(e.used) > idle {
			delete(p.entries, id)
			closing = append(closing, e)
		}
	}
	p.mu.Unlock()
	for _, e := range closing {
		p.close(e)
	}
}

// Len is how many publishers are open or opening.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Close closes every publisher.
func (p *Pool) Close() {
	p.mu.Lock()
	entries := p.entries
	p.entries = nil
	p.mu.Unlock()
	for _, e := range entries {
		p.close(e)
	}
}

func (p *Pool) close(e *entry) {
	<-e.ready
	if e.pub != nil {
		_ = e.pub.Close()
	}
}
