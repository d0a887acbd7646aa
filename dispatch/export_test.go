package dispatch

import (
	"context"

	"github.com/webhookd/webhookd/model"
)

// StartWorkflows is start for the external tests: the starts of a sweep, which are never eager.
func StartWorkflows(ctx context.Context, d *Dispatcher, refs []model.DeliveryRef) ([]int64, error) {
	return d.start(ctx, refs, StartedBySweeper)
}

// StartsWaiting is how many of account's starts wait in d for a slot of the account's share.
func StartsWaiting(d *Dispatcher, account int64) int {
	d.shares.mu.Lock()
	defer d.shares.mu.Unlock()
	sh := d.shares.byAccount[account]
	if sh == nil {
		return 0
	}
	return sh.users - len(sh.slots)
}

// Pending is how many ids m holds that no write has taken yet.
func (m *Marks) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}
