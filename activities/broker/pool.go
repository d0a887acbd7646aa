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
// resources"). A publisher is retired when its webhook's destination changes (the next attempt
// finds another version and opens a new one) or the webhook is deleted (Run's sweep), and when it
// was idle for IdleTimeout; a retired publisher is closed once the publishes in flight on it end,
// never under them.
type Pool struct {
	// Open opens a Publisher for a target (Open, by the destination's type).
	Open func(ctx context.Context, t Target) (Publisher, error)
	// Live reads which of the webhooks ids are live, with the version of each
	// (model.Webhook.DestinationVersion): Run retires the publishers of the others.
	Live func(ctx context.Context, ids []int64) (map[int64]string, error)
	// IdleTimeout retires a publisher unused for this long; zero takes DefaultIdleTimeout.
	IdleTimeout time.Duration
	Log         *slog.Logger

	mu      sync.Mutex
	entries map[int64]*entry
}

// DefaultIdleTimeout is how long an unused publisher stays open.
const DefaultIdleTimeout = 5 * time.Minute

// sweepEvery is how often Run looks for publishers to retire.
const sweepEvery = 30 * time.Second

type entry struct {
	version string
	pub     Publisher
	used    time.Time
	// ready is closed once pub (or err) is set: concurrent attempts of one webhook open one
	// publisher.
	ready chan struct{}
	err   error
	// inUse counts the publishes holding the entry; retired, it is closed when the last ends.
	inUse   int
	retired bool
}

// Get returns the publisher of webhook id at version, opening it with target when the pool has none
// of that version (one of another version is retired), and the release to call once the publish
// ended.
func (p *Pool) Get(ctx context.Context, id int64, version string, target func() Target) (Publisher, func(), error) {
	p.mu.Lock()
	if p.entries == nil {
		p.entries = make(map[int64]*entry)
	}
	e := p.entries[id]
	if e != nil && e.version != version {
		delete(p.entries, id)
		p.retireLocked(e)
		e = nil
	}
	opening := e == nil
	if opening {
		e = &entry{version: version, ready: make(chan struct{})}
		p.entries[id] = e
	}
	e.inUse++
	e.used = time.Now()
	p.mu.Unlock()
	release := func() { p.release(e) }
	if opening {
		pub, err := p.Open(ctx, target())
		p.mu.Lock()
		e.pub, e.err = pub, err
		if err != nil && p.entries[id] == e {
			delete(p.entries, id)
		}
		p.mu.Unlock()
		close(e.ready)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		release()
		return nil, nil, e.err
	}
	return e.pub, release, nil
}

func (p *Pool) release(e *entry) {
	p.mu.Lock()
	e.inUse--
	closeNow := e.retired && e.inUse == 0
	p.mu.Unlock()
	if closeNow {
		go p.close(e)
	}
}

// retireLocked retires e, out of the map already: it is closed now when no publish holds it, else
// by the last one's release.
func (p *Pool) retireLocked(e *entry) {
	if e.retired {
		return
	}
	e.retired = true
	if e.inUse == 0 {
		go p.close(e)
	}
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

// Sweep retires the publishers of webhooks deleted or changed, and those idle too long.
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
	var live map[int64]string
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
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.entries {
		v, ok := live[id]
		gone := live != nil && (!ok || v != e.version)
		if gone || e.inUse == 0 && now.Sub(e.used) > idle {
			delete(p.entries, id)
			p.retireLocked(e)
		}
	}
}

// Len is how many publishers are open or opening.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

// Close closes every publisher, at once: the worker is stopping.
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
