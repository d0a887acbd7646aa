package dispatch

import (
	"context"

	"github.com/webhookd/webhookd/model"
)

// StartWorkflows is start for the external tests: the starts of a sweep, which are never eager.
func StartWorkflows(ctx context.Context, d *Dispatcher, refs []model.DeliveryRef) ([]int64, error) {
	return d.start(ctx, refs, StartedBySweeper)
}
