package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestCreateReplayRunningLimit (issue 46): an account and variant run at most maxRunning replays at
// once; the next is refused with nothing written, another variant and another account are not
// held by them, and one that ends makes room.
func TestCreateReplayRunningLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, a, err := model.CreateAPIKey(ctx, db, "replays-a@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		_, b, err := model.CreateAPIKey(ctx, db, "replays-b@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		create := func(account int64, v model.Variant) (*model.Replay, error) {
			r := &model.Replay{AccountID: account, Variant: v, Criteria: `{}`}
			return r, model.CreateReplay(ctx, db, r, []int64{1, 2}, 2)
		}
		var first *model.Replay
		for i := range 2 {
			r, err := create(a.ID, model.VariantA)
			if err != nil {
				t.Fatalf("replay %d of 2: %v", i+1, err)
			}
			if first == nil {
				first = r
			}
		}
		if r, err := create(a.ID, model.VariantA); !errors.Is(err, model.ErrReplaysRunning) || r.ID != 0 {
			t.Fatalf("a third running replay: id %d, %v; want ErrReplaysRunning and nothing stored", r.ID, err)
		}
		if _, err := create(a.ID, model.VariantB); err != nil {
			t.Fatalf("the other variant's replay: %v", err)
		}
		if _, err := create(b.ID, model.VariantA); err != nil {
			t.Fatalf("another account's replay: %v", err)
		}
		if _, err := model.EndReplay(ctx, db, nil, first.ID, model.ReplayCanceled); err != nil {
			t.Fatal(err)
		}
		if _, err := create(a.ID, model.VariantA); err != nil {
			t.Fatalf("a replay once one has ended: %v", err)
		}
	})
}
