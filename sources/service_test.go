package sources_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// newService is the sources' use cases on db, publishing through the webhooks' use cases, with
// timers when given (a nil one is left unset).
func newService(t *testing.T, db *model.DB, timers *dispatch.Dispatcher) *sources.Service {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	cfg := sources.Config{DB: db, Publisher: webhookstest.New(t, db, box, logger, webhookstest.Config{MaxWebhooks: 100}),
		SiteBaseURL: "https://sites.example.com", RequestTimeout: time.Second, Logger: logger}
	if timers != nil {
		cfg.Timers = timers
	}
	s, err := sources.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newAccount is a new account (an owner's e-mail names one).
func newAccount(t *testing.T, db *model.DB) int64 {
	t.Helper()
	accounts++
	_, acc, err := model.CreateAPIKey(t.Context(), db, fmt.Sprintf("owner%d@example.com", accounts), "")
	if err != nil {
		t.Fatal(err)
	}
	return acc.ID
}

var accounts int

// unreachableTemporal is a Dispatcher whose Temporal never answers: nothing listens on port 1.
func unreachableTemporal(t *testing.T) *dispatch.Dispatcher {
	tc, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return &dispatch.Dispatcher{Client: tc, TaskQueue: "nowhere"}
}

// TestCreateCampaignEndsAfterItStarts: a campaign whose end is not after its start is refused
// with ErrEndBeforeStart and nothing is stored; one that ends later is stored active.
func TestCreateCampaignEndsAfterItStarts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		s, account := newService(t, db, nil), newAccount(t, db)
		start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		for _, end := range []time.Time{start, start.Add(-time.Millisecond)} {
			_, err := s.CreateCampaign(ctx, account, sources.NewCampaign{Name: "c", Platform: "meta", Budget: 1, StartDate: start, EndDate: end})
			if !errors.Is(err, sources.ErrEndBeforeStart) {
				t.Fatalf("end %v, start %v: %v, want ErrEndBeforeStart", end, start, err)
			}
		}
		if cs, err := s.Campaigns(ctx, account, 0, 10); err != nil || len(cs) != 0 {
			t.Fatalf("after refusals the account has %d campaigns (%v)", len(cs), err)
		}
		camp, err := s.CreateCampaign(ctx, account, sources.NewCampaign{Name: "c", Platform: "meta", Budget: 1, StartDate: start, EndDate: start.Add(time.Millisecond)})
		if err != nil || camp.Status != sources.CampaignActive {
			t.Fatalf("a campaign that ends after it starts: %+v, %v", camp, err)
		}
		if _, err := s.Campaign(ctx, newAccount(t, db), camp.ID); !errors.Is(err, sources.ErrNotFound) {
			t.Fatalf("another account's campaign: %v, want ErrNotFound", err)
		}
	})
}

// TestScheduleWebsiteRules: a schedule needs a time in the future, a draft, and a timer that
// starts; when the timer cannot start, the website is as it was.
func TestScheduleWebsiteRules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		account := newAccount(t, db)
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)

		untimed := newService(t, db, nil)
		w, err := untimed.CreateWebsite(ctx, account, 1, "spring")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := untimed.ScheduleWebsite(ctx, account, w.ID, time.Now().Add(-time.Second)); !errors.Is(err, sources.ErrScheduleNotFuture) {
			t.Fatalf("a schedule in the past: %v, want ErrScheduleNotFuture", err)
		}
		if _, err := untimed.ScheduleWebsite(ctx, account, w.ID, later); !errors.Is(err, sources.ErrUnavailable) {
			t.Fatalf("a schedule without timers: %v, want ErrUnavailable", err)
		}

		down := newService(t, db, unreachableTemporal(t))
		if _, err := down.ScheduleWebsite(ctx, newAccount(t, db), w.ID, later); !errors.Is(err, sources.ErrNotFound) {
			t.Fatalf("another account's website: %v, want ErrNotFound", err)
		}
		if _, err := down.ScheduleWebsite(ctx, account, w.ID, later); !errors.Is(err, sources.ErrUnavailable) {
			t.Fatalf("a schedule Temporal cannot start: %v, want ErrUnavailable", err)
		}
		if got, err := down.Website(ctx, account, w.ID); err != nil || got.ScheduledAt != nil || got.Status != sources.WebsiteDraft ||
			!got.UpdatedAt.Equal(w.UpdatedAt) {
			t.Fatalf("after Temporal refused the website is %+v (%v), want it as created %+v", got, err, w)
		}

		if _, err := down.PublishWebsite(ctx, account, w.ID); err != nil {
			t.Fatal(err)
		}
		_, err = down.ScheduleWebsite(ctx, account, w.ID, later)
		if !errors.Is(err, sources.ErrInvalidTransition) || err.Error() != "a published website cannot be scheduled for publication" {
			t.Fatalf("a schedule of a published website: %v, want ErrInvalidTransition", err)
		}
	})
}
