package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// TestCancelReplay (issue 46): a running replay canceled within its scope ends canceled, its counts
// kept, and the audit log records it once; canceled again, or from another account, nothing more
// happens.
func TestCancelReplay(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 10)
	_, acc, err := model.CreateAPIKey(t.Context(), db, "replay@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := model.CreateAPIKey(t.Context(), db, "other-replay@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	scope := model.WebhookScope{AccountID: acc.ID, Variant: model.VariantA}
	r := &model.Replay{AccountID: acc.ID, Variant: model.VariantA, Criteria: `{"since":"2020-01-01T00:00:00Z","until":"2020-01-02T00:00:00Z","states":["exhausted"]}`}
	if err := model.CreateReplay(t.Context(), db, r, []int64{7, 8, 9}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelReplay(t.Context(), model.WebhookScope{AccountID: other.ID, Variant: model.VariantA}, r.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another account's cancel: %v, want ErrNotFound", err)
	}
	if _, err := s.CancelReplay(t.Context(), model.WebhookScope{AccountID: acc.ID, Variant: model.VariantB}, r.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("another variant's cancel: %v, want ErrNotFound", err)
	}
	for range 2 {
		got, err := s.CancelReplay(t.Context(), scope, r.ID)
		if err != nil || got.State != model.ReplayCanceled || got.Matched != 3 || got.Remaining() != 3 || got.FinishedAt == nil {
			t.Fatalf("cancel: %+v, %v", got, err)
		}
	}
	page, err := model.ListAudit(t.Context(), db, scope, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range page.Entries {
		if e.Action == audit.ReplayCancel {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d replay.cancel entries, want 1: %+v", n, page.Entries)
	}
}

// TestReplayMatchBounds: a replay's match is bounded as a filter trial is. With a filter it reads
// no more event data than its budget and one page past it, then refuses naming filter; past its
// time it refuses naming since; an account's third match at once is refused with the time to retry
// after while another account's runs; a caller that leaves gets its context's error. Each bound
// answers a dry run; a replay's creation runs the same match (matchReplay).
func TestReplayMatchBounds(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		webhookstest.WatchTrials(db)
		s := newService(t, db, 10)
		scope, other := scopeOf(t, db, model.VariantA), scopeOf(t, db, model.VariantA)
		for _, sc := range []model.WebhookScope{scope, other} {
			if _, _, err := s.Create(t.Context(), sc, webhooks.Registration{URL: "https://r.example.com/", EventType: "campaign.created"}); err != nil {
				t.Fatal(err)
			}
		}
		const size = 100 << 10
		storeEvents(t, db, scope, "campaign.created", 40, size) // 4 MiB, one delivery each
		storeEvents(t, db, other, "campaign.created", 1, 100)
		ask := webhooks.ReplayAsk{Since: model.Now().Add(-time.Hour), States: []string{model.DeliveryPending}}
		filtered := ask
		filtered.Filter = json.RawMessage(`{"data":{"pad":{"$exist":true}}}`)

		// Within the budget, the match is whole.
		plan, err := s.PlanReplay(t.Context(), scope, filtered)
		if err != nil || plan.Matched != 40 {
			t.Fatalf("a filtered dry run within its budget: %+v, %v; want 40 matched", plan, err)
		}

		// Past it: refused, naming filter, after reading no more than the budget and a page.
		const budget = 1 << 20
		webhooks.SetReplayMatchBytes(s, budget)
		w := &webhookstest.Watch{}
		_, err = s.PlanReplay(w.Context(t.Context()), scope, filtered)
		var invalid *webhooks.InvalidError
		if !errors.As(err, &invalid) || invalid.Field != "filter" {
			t.Fatalf("a filtered dry run past its budget: %v; want refused naming filter", err)
		}
		if read := w.EventsRead() * size; read > budget+32*size || read <= budget {
			t.Errorf("the refused match read %d bytes of events; want past %d and at most a page (32 events) more", read, budget)
		}
		// Without a filter the match reads no event data, and the byte budget does not apply.
		w = &webhookstest.Watch{}
		if plan, err := s.PlanReplay(w.Context(t.Context()), scope, ask); err != nil || plan.Matched != 40 || w.EventsRead() != 0 {
			t.Errorf("an unfiltered dry run: %+v, %v, %d events' data read; want 40 matched, none read", plan, err, w.EventsRead())
		}
		webhooks.SetReplayMatchBytes(s, webhooks.MaxReplayMatchBytes)

		// Past its time: refused, naming since, while the caller still waits.
		webhooks.SetReplayMatchTime(s, time.Millisecond)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		held := make(chan struct{}, 1)
		w = &webhookstest.Watch{Held: held} // never released: only a deadline ends the wait
		_, err = s.PlanReplay(w.Context(ctx), scope, ask)
		if !errors.As(err, &invalid) || invalid.Field != "since" || ctx.Err() != nil {
			t.Fatalf("a dry run past its time: %v (caller's context: %v); want refused naming since", err, ctx.Err())
		}
		webhooks.SetReplayMatchTime(s, webhooks.MaxReplayMatchTime)

		// A caller that leaves: its context's error, not a refusal.
		gone, leave := context.WithCancel(t.Context())
		w = &webhookstest.Watch{Held: held}
		go func() { <-held; leave() }()
		if _, err := s.PlanReplay(w.Context(gone), scope, ask); !errors.Is(err, context.Canceled) {
			t.Fatalf("a dry run whose caller left: %v; want context.Canceled", err)
		}

		// Two matches of one account held at their first read; a third is refused, another
		// account's runs.
		gate := webhookstest.NewGate()
		defer gate.Open()
		results := make(chan error, webhooks.MaxConcurrentReplayMatches)
		for range webhooks.MaxConcurrentReplayMatches {
			w := gate.Watch()
			go func() {
				_, err := s.PlanReplay(w.Context(t.Context()), scope, filtered)
				results <- err
			}()
			gate.AwaitHeld()
		}
		_, err = s.PlanReplay(t.Context(), scope, ask)
		var busy *webhooks.BusyError
		if !errors.As(err, &busy) || busy.RetryAfter != webhooks.MaxReplayMatchTime {
			t.Errorf("match %d of one account at once: %v; want a BusyError retrying after %v", webhooks.MaxConcurrentReplayMatches+1, err, webhooks.MaxReplayMatchTime)
		}
		if plan, err := s.PlanReplay(t.Context(), other, filtered); err != nil || plan.Matched != 1 {
			t.Errorf("another account's dry run meanwhile: %+v, %v", plan, err)
		}
		gate.Open()
		for range webhooks.MaxConcurrentReplayMatches {
			if err := <-results; err != nil {
				t.Errorf("a held match: %v", err)
			}
		}
		if plan, err := s.PlanReplay(t.Context(), scope, ask); err != nil || plan.Matched != 40 {
			t.Errorf("the account's next dry run, once its matches ended: %+v, %v", plan, err)
		}
	})
}
