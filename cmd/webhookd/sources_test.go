package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

// testSources is the sources' use cases on db, publishing through uses, with no publication timers.
func testSources(t testing.TB, db *model.DB, uses *webhooks.Service) *sources.Service {
	t.Helper()
	s, err := sources.New(sources.Config{DB: db, Publisher: uses, RequestTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
