package model

import (
	"context"

	"github.com/uptrace/bun"
)

// ChangeSet is one domain change in progress: its transaction and the events it emits (the
// outbox). The events and their deliveries commit, or roll back, with the change; whoever ran the
// change starts their deliveries after the commit (dispatch.Publisher), or leaves them to the
// worker's sweeper.
type ChangeSet struct {
	Tx bun.Tx
	// Clock stamps the events Emit stores without an At of their own (nil: Now).
	Clock   Clock
	Results []*PublishResult
	// stmts are the statements of Tx's database.
	stmts *statements
	// versions is the table of event versions the change's events are published with (Change).
	versions EventVersions
}

// Emit stores an event and its deliveries in the change's transaction, in the newest version of its
// type when it names none, its subscribers' filters judged on bodies converted by the change's table
// of versions.
func (cs *ChangeSet) Emit(ctx context.Context, ne NewEvent) (*PublishResult, error) {
	if cs.stmts == nil {
		cs.stmts = statementsOf(cs.Tx)
	}
	if ne.At.IsZero() {
		ne.At = cs.Clock.Now()
	}
	res, err := insertEvent(ctx, cs.Tx, cs.stmts, cs.versions, ne)
	if err != nil {
		return nil, err
	}
	cs.Results = append(cs.Results, res)
	return res, nil
}

// Change runs fn in one transaction on db and returns what it emitted once it committed. The
// statements its events take are prepared before the transaction begins (statements.prepare).
// versions is the table of event versions its events are published with (nil: none, every type has
// version 1).
func Change(ctx context.Context, db bun.IDB, versions EventVersions, fn func(ctx context.Context, cs *ChangeSet) error) (*ChangeSet, error) {
	stmts := statementsOf(db)
	if err := stmts.prepare(ctx, db); err != nil {
		return nil, err
	}
	var cs *ChangeSet
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		cs = &ChangeSet{Tx: tx, stmts: stmts, versions: versions}
		return fn(ctx, cs)
	})
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// Filtered counts, by variant, the webhooks whose payload filters refused the newly accepted events
// among results (a replayed event was counted when it was accepted).
func Filtered(results []*PublishResult) map[Variant]int {
	var n map[Variant]int
	for _, res := range results {
		if res.Replayed || res.Event.Filtered == 0 {
			continue
		}
		if n == nil {
			n = map[Variant]int{}
		}
		n[res.Event.Variant] += res.Event.Filtered
	}
	return n
}
