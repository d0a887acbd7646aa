package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// passAll is a filter that every stored event of these tests passes.
var passAll = json.RawMessage(`{"data":{}}`)

// storeEvents stores n events of scope's variant and eventType, each with data of exactly size
// bytes (at least 10).
func storeEvents(t *testing.T, db *model.DB, scope model.WebhookScope, eventType string, n, size int) {
	t.Helper()
	data := `{"pad":"` + strings.Repeat("x", size-10) + `"}`
	for range n {
		if _, err := model.InsertEvent(t.Context(), db, model.NewEvent{AccountID: scope.AccountID, Variant: scope.Variant, EventType: eventType, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTryFilterReadsAtMostItsBudget (issue 40): a trial over more stored data than MaxTrialBytes
// reads, at the database, no more than MaxTrialBytes, one page of at most TrialPageBytes at a time,
// and says it stopped for its bytes; one that reaches its limit first is whole.
func TestTryFilterReadsAtMostItsBudget(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		webhookstest.WatchTrials(db)
		s := newService(t, db, 10)
		scope := scopeOf(t, db, model.VariantA)
		const size = 200 << 10
		storeEvents(t, db, scope, "campaign.created", 60, size) // 11.7 MiB

		w := &webhookstest.Watch{}
		trial, err := s.TryFilter(w.Context(t.Context()), scope, passAll, "campaign.created", webhooks.MaxTrialEvents)
		if err != nil {
			t.Fatal(err)
		}
		read := w.EventsRead()
		if read*size > webhooks.MaxTrialBytes {
			t.Errorf("the trial read %d events of %d bytes, %d bytes; the bound is %d", read, size, read*size, webhooks.MaxTrialBytes)
		}
		for i, p := range w.Pages() {
			if p*size > webhooks.TrialPageBytes {
				t.Errorf("page %d held %d events, %d bytes; a page holds at most %d", i, p, p*size, webhooks.TrialPageBytes)
			}
		}
		if want := webhooks.MaxTrialBytes / size; trial.Scanned != int(read) || trial.Scanned != want || trial.Matched != want ||
			trial.TruncatedBy != webhooks.TrialStoppedByBytes {
			t.Errorf("trial = %d scanned, %d matched, truncated by %q (%d events read); want %d, %d, %q",
				trial.Scanned, trial.Matched, trial.TruncatedBy, read, want, want, webhooks.TrialStoppedByBytes)
		}

		w = &webhookstest.Watch{}
		trial, err = s.TryFilter(w.Context(t.Context()), scope, passAll, "campaign.created", 12)
		if err != nil {
			t.Fatal(err)
		}
		if trial.Scanned != 12 || trial.TruncatedBy != "" || w.EventsRead() != 12 {
			t.Errorf("a trial of 12 = %d scanned, truncated by %q, %d events read; want 12, none, 12", trial.Scanned, trial.TruncatedBy, w.EventsRead())
		}
	})
}

// TestTryFilterStopsWhenCallerLeaves (issue 40): a trial whose caller's context ends reads no
// further page, and answers the context's error rather than a partial count.
func TestTryFilterStopsWhenCallerLeaves(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		webhookstest.WatchTrials(db)
		s := newService(t, db, 10)
		scope := scopeOf(t, db, model.VariantB)
		storeEvents(t, db, scope, "lead.captured", 3*webhooks.TrialPageEvents, 100)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := &webhookstest.Watch{AfterPage: cancel} // the client leaves once the first page is read
		trial, err := s.TryFilter(w.Context(ctx), scope, passAll, "lead.captured", webhooks.MaxTrialEvents)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a canceled trial answered %+v, %v; want context.Canceled", trial, err)
		}
		if pages := w.Pages(); len(pages) != 1 || pages[0] > webhooks.TrialPageEvents {
			t.Errorf("a trial canceled after its first page read pages of %v events; want one page of at most %d", pages, webhooks.TrialPageEvents)
		}
	})
}

// TestTryFilterStopsAtItsDeadline (issue 40): a trial still working when its time is up stops and
// answers what it read, saying it stopped for time. The read is held until the trial's own
// deadline ends it, so the outcome does not depend on how fast anything runs; the caller's
// context, a minute long, only keeps a broken trial from hanging the test.
func TestTryFilterStopsAtItsDeadline(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		webhookstest.WatchTrials(db)
		s := newService(t, db, 10)
		webhooks.SetTrialTime(s, time.Millisecond)
		scope := scopeOf(t, db, model.VariantA)
		storeEvents(t, db, scope, "campaign.created", 3, 100)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		held := make(chan struct{}, 1)
		w := &webhookstest.Watch{Held: held} // never released: only a deadline ends the wait
		trial, err := s.TryFilter(w.Context(ctx), scope, passAll, "campaign.created", 0)
		if err != nil || trial.TruncatedBy != webhooks.TrialStoppedByTime || trial.Scanned != 0 || ctx.Err() != nil {
			t.Errorf("a trial past its deadline answered %+v, %v (caller's context: %v); want 0 scanned, truncated by time", trial, err, ctx.Err())
		}
	})
}

// TestTryFilterConcurrencyPerAccount (issue 40): an account runs at most MaxConcurrentTrials trials
// at once; one more is refused with the time to retry after, while another account's trial runs,
// and the account's next trial runs once one has ended.
func TestTryFilterConcurrencyPerAccount(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		webhookstest.WatchTrials(db)
		s := newService(t, db, 10)
		a, b := scopeOf(t, db, model.VariantA), scopeOf(t, db, model.VariantA)
		storeEvents(t, db, a, "campaign.created", 1, 100)
		storeEvents(t, db, b, "campaign.created", 1, 100)

		gate := webhookstest.NewGate()
		defer gate.Open()
		type result struct {
			trial webhooks.Trial
			err   error
		}
		results := make(chan result, webhooks.MaxConcurrentTrials)
		for range webhooks.MaxConcurrentTrials {
			w := gate.Watch()
			go func() {
				trial, err := s.TryFilter(w.Context(t.Context()), a, passAll, "campaign.created", 0)
				results <- result{trial, err}
			}()
			gate.AwaitHeld() // running, and holding its place until released
		}

		_, err := s.TryFilter(t.Context(), a, passAll, "campaign.created", 0)
		var busy *webhooks.BusyError
		if !errors.As(err, &busy) || busy.RetryAfter != webhooks.MaxTrialTime {
			t.Errorf("trial %d of one account at once: %v; want a BusyError retrying after %v", webhooks.MaxConcurrentTrials+1, err, webhooks.MaxTrialTime)
		}
		other, err := s.TryFilter(t.Context(), b, passAll, "campaign.created", 0)
		if err != nil || other.Scanned != 1 {
			t.Errorf("another account's trial meanwhile: %+v, %v; want 1 scanned", other, err)
		}

		gate.Open()
		for range webhooks.MaxConcurrentTrials {
			if r := <-results; r.err != nil || r.trial.Scanned != 1 {
				t.Errorf("a held trial answered %+v, %v; want 1 scanned", r.trial, r.err)
			}
		}
		if after, err := s.TryFilter(t.Context(), a, passAll, "campaign.created", 0); err != nil || after.Scanned != 1 {
			t.Errorf("the account's trial after the others ended: %+v, %v; want 1 scanned", after, err)
		}
	})
}
