package dispatch

import (
	"context"
	"slices"
	"sync"

	"github.com/webhookd/webhookd/model"
)

// accountStarts bounds the delivery workflow starts one account has in flight in this process.
// Every start is a write to the Temporal server's history (on the dev server, one SQLite writer
// and one shard), which all accounts share and which serves requests in the order they come: a
// fan-out of 1,000 deliveries to hanging receivers had 10 fan-outs x 16 starts in flight, and
// another account's one start waited behind them past its request's dispatch bound (1.5 s), then
// for the sweeper: its delivery arrived 6.5-9.1 s after its publish (issue 40). With at most 8 of
// one account's starts in the server's queue, another account's start waits behind 8 of each busy
// account's at most. A start takes a few milliseconds, so 8 in flight still start a fan-out's
// deliveries faster than the server runs them.
const accountStarts = 8

// startShares holds each account's share of the starts in flight; its zero value is ready.
type startShares struct {
	mu        sync.Mutex
	byAccount map[int64]*startShare
}

type startShare struct {
	slots chan struct{}
	users int // holders and waiters: the share is forgotten when none is left
}

// take waits for one of account's start slots, or for ctx to end, and returns the slot's release.
func (s *startShares) take(ctx context.Context, account int64) (func(), error) {
	s.mu.Lock()
	if s.byAccount == nil {
		s.byAccount = make(map[int64]*startShare)
	}
	sh := s.byAccount[account]
	if sh == nil {
		sh = &startShare{slots: make(chan struct{}, accountStarts)}
		s.byAccount[account] = sh
	}
	sh.users++
	s.mu.Unlock()

	leave := func() {
		s.mu.Lock()
		if sh.users--; sh.users == 0 {
			delete(s.byAccount, account)
		}
		s.mu.Unlock()
	}
	select {
	case sh.slots <- struct{}{}:
		return func() { <-sh.slots; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// interleave orders refs round-robin across their accounts, each account's in their own order, so
// that a batch of several accounts' deliveries (a sweep of the outbox) starts one account's after
// another's instead of waiting for a large account's share to work through its backlog first.
func interleave(refs []model.DeliveryRef) []model.DeliveryRef {
	if !slices.ContainsFunc(refs, func(r model.DeliveryRef) bool { return r.AccountID != refs[0].AccountID }) {
		return refs // one account's (a fan-out's): nothing to reorder, and nothing copied
	}
	var accounts []int64
	by := make(map[int64][]model.DeliveryRef)
	for _, r := range refs {
		if _, ok := by[r.AccountID]; !ok {
			accounts = append(accounts, r.AccountID)
		}
		by[r.AccountID] = append(by[r.AccountID], r)
	}
	out := make([]model.DeliveryRef, 0, len(refs))
	for len(out) < len(refs) {
		for _, a := range accounts {
			if q := by[a]; len(q) > 0 {
				out = append(out, q[0])
				by[a] = q[1:]
			}
		}
	}
	return out
}
