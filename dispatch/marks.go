package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// markTimeout bounds one write of Marks, and maxMarkBatch its ids.
const (
	markTimeout  = 10 * time.Second
	maxMarkBatch = 500
)

// MarkLinger is how long Marks gathers ids before each write. Without it a write
// took what came in during the one before, a few milliseconds: one or two requests' ids per
// statement and commit, 5% of webhookd's CPU per delivery in a profile. A linger far below the
// sweeper's minimum age (its interval, 5 s by default) costs nothing: the sweeper never looks at a
// delivery that young.
const MarkLinger = 250 * time.Millisecond

// Marks records deliveries dispatched (MarkDispatched) off the caller's path, and many per
// statement: a request that started its workflows hands their ids over and answers at once, and
// the ids that come in within Linger of each other go out together. Under load that is one write
// for many events instead of one each (docs/performance-history.md).
//
// The mark is only the outbox's bookkeeping: one that is never written (the process died first)
// costs the sweeper one start that Temporal refuses as a duplicate, and the sweeper then writes
// it. Nothing is lost either way.
type Marks struct {
	DB bun.IDB
	// Log reports a failed write; nil logs nothing.
	Log *slog.Logger
	// Linger is how long ids are gathered before each write; zero writes at once.
	// MarkLinger is the serving default.
	Linger time.Duration

	mu      sync.Mutex
	pending []int64
	writing bool // a writer is running: at most one at a time
	writers sync.WaitGroup
}

// Add hands ids over to be marked; it does not wait for the write.
func (m *Marks) Add(ids []int64) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, ids...)
	if !m.writing {
		m.writing = true
		m.writers.Go(m.write)
	}
}

// write marks what is pending, batch after batch, until nothing is. It lingers before a batch
// that is not full yet, never behind a backlog.
func (m *Marks) write() {
	for {
		m.mu.Lock()
		full := len(m.pending) >= maxMarkBatch
		m.mu.Unlock()
		if m.Linger > 0 && !full {
			time.Sleep(m.Linger)
		}
		m.mu.Lock()
		batch := m.pending[:min(len(m.pending), maxMarkBatch)]
		m.pending = m.pending[len(batch):]
		if len(batch) == 0 {
			m.writing = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
		err := model.MarkDispatched(ctx, m.DB, batch)
		cancel()
		if err != nil && m.Log != nil {
			m.Log.Warn("mark deliveries dispatched; the sweeper will", "deliveries", len(batch), "err", err)
		}
	}
}

// Wait returns once every id handed over so far is written (or its write failed).
func (m *Marks) Wait() { m.writers.Wait() }
