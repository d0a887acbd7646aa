package dispatch

import (
	"context"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestInterleave: a batch of several accounts' deliveries starts round-robin across the accounts,
// each account's in their order; one account's batch is left as it is.
func TestInterleave(t *testing.T) {
	refs := func(accounts ...int64) []model.DeliveryRef {
		out := make([]model.DeliveryRef, len(accounts))
		for i, a := range accounts {
			out[i] = model.DeliveryRef{DeliveryID: int64(i + 1), AccountID: a}
		}
		return out
	}
	ids := func(rs []model.DeliveryRef) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.DeliveryID)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		accounts []int64
		want     []int64
	}{
		{"one account", []int64{1, 1, 1}, []int64{1, 2, 3}},
		{"a large account first", []int64{1, 1, 1, 1, 2, 3}, []int64{1, 5, 6, 2, 3, 4}},
		{"mixed", []int64{2, 1, 2, 1, 2}, []int64{1, 2, 3, 4, 5}},
		{"uneven", []int64{1, 1, 1, 2, 2, 3}, []int64{1, 4, 6, 2, 5, 3}},
	} {
		if got := ids(interleave(refs(tc.accounts...))); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStartSharesForgetIdleAccounts: an account's share is kept while a start holds or waits for a
// slot, and forgotten once none does, so the map does not grow with every account that ever
// published.
func TestStartSharesForgetIdleAccounts(t *testing.T) {
	var s startShares
	var releases []func()
	for range accountStarts {
		r, err := s.take(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.take(ctx, 1); err == nil {
		t.Fatalf("a ninth start of account 1 took a slot beside %d in flight", accountStarts)
	}
	if len(s.byAccount) != 1 {
		t.Fatalf("%d shares kept, want account 1's", len(s.byAccount))
	}
	for _, r := range releases {
		r()
	}
	if len(s.byAccount) != 0 {
		t.Fatalf("%d shares kept after every start ended, want none", len(s.byAccount))
	}
}
