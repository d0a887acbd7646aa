package webhookstest

import (
	"context"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// WatchTrials makes db report the queries made under a Watch's context to that Watch, so that a
// test sees what a filter trial, or a replay's match, reads at the database, whatever it says of
// itself. Call it before db is used by more than one goroutine.
func WatchTrials(db *model.DB) {
	//lint:ignore SA1019 WithQueryHook hooks a copy; the use cases hold db itself, statements and all
	db.AddQueryHook(trialHook{})
}

// Watch is one watched call (Context): the events' data each of its queries loaded, and, when
// asked, a hold on its first query or a function run after each page of data.
type Watch struct {
	// Held, when set, receives once, as the call's first query of events or deliveries is about to
	// run (the
	// request's earlier ones, its authentication, run on); the query then waits until Release is
	// closed or the call's context ends.
	Held    chan<- struct{}
	Release <-chan struct{}
	// AfterPage, when set, runs after each query that loaded events' data.
	AfterPage func()

	mu    sync.Mutex
	began bool
	pages []int64
}

type watchKey struct{}

// Context is parent watched by w.
func (w *Watch) Context(parent context.Context) context.Context {
	return context.WithValue(parent, watchKey{}, w)
}

// Pages is how many events' data each query of the call loaded, in order.
func (w *Watch) Pages() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.pages...)
}

// EventsRead is how many events' data the call loaded in all.
func (w *Watch) EventsRead() int64 {
	var n int64
	for _, p := range w.Pages() {
		n += p
	}
	return n
}

type trialHook struct{}

func (trialHook) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	w, ok := ctx.Value(watchKey{}).(*Watch)
	if !ok || w.Held == nil || !strings.Contains(e.Query, `FROM "events"`) && !strings.Contains(e.Query, "FROM deliveries") {
		return ctx
	}
	w.mu.Lock()
	first := !w.began
	w.began = true
	w.mu.Unlock()
	if first {
		w.Held <- struct{}{}
		select {
		case <-w.Release:
		case <-ctx.Done():
		}
	}
	return ctx
}

func (trialHook) AfterQuery(ctx context.Context, e *bun.QueryEvent) {
	w, ok := ctx.Value(watchKey{}).(*Watch)
	// The rows of events themselves, data and all, or of deliveries with their events' data; a
	// page of events is planned from their ids and sizes first, which carry no data.
	if !ok || e.Err != nil || e.Result == nil || !strings.Contains(e.Query, `"event"."data"`) && !strings.Contains(e.Query, "e.data AS event_data") {
		return
	}
	n, err := e.Result.RowsAffected()
	if err != nil {
		return
	}
	w.mu.Lock()
	w.pages = append(w.pages, n)
	w.mu.Unlock()
	if w.AfterPage != nil {
		w.AfterPage()
	}
}

// Gate holds calls at their first query of events until it is opened: the trials' tests keep an
// account's trials running with it while they try one more.
type Gate struct {
	held, release chan struct{}
	once          sync.Once
}

func NewGate() *Gate { return &Gate{held: make(chan struct{}), release: make(chan struct{})} }

// Watch is a Watch whose call the gate holds.
func (g *Gate) Watch() *Watch { return &Watch{Held: g.held, Release: g.release} }

// AwaitHeld waits until one more call is held.
func (g *Gate) AwaitHeld() { <-g.held }

// Open lets every held call go on; opened again, it does nothing.
func (g *Gate) Open() { g.once.Do(func() { close(g.release) }) }
