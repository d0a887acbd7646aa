// Package webhookstest builds the use cases (package webhooks) for the tests of the surfaces that
// call them: the API's, the portal's, the CLI's.
package webhookstest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

// OfflineResolver fails every lookup at once, the way an unresolvable name does, so that tests
// never wait on DNS and URLs with made-up names are accepted (the dial-time check is the one that
// decides).
var OfflineResolver = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS in tests")
}}

// Config is what a test chooses of the use cases: a dispatcher (nil: none), the account's
// webhook limit and the auto-disable rule (zero: off).
type Config struct {
	Dispatcher  *dispatch.Dispatcher
	MaxWebhooks int64
	Disable     notices.DisableRule
	// TrialTime bounds a filter trial (webhooks.Config.TrialTime); zero is webhooks.MaxTrialTime.
	TrialTime time.Duration
	// Clock is the use cases' time (webhooks.Config.Clock); nil is model.Now.
	Clock model.Clock
	// Versions is the table of event versions (webhooks.Config.Versions); nil is sources', as
	// serve's.
	Versions model.EventVersions
}

// New is the Service over db and box, judging URLs offline, with serve's request timeout and
// sources' versions of event types, as serve's.
func New(t testing.TB, db *model.DB, box *secretbox.Box, logger *slog.Logger, c Config) *webhooks.Service {
	t.Helper()
	versions := c.Versions
	if versions == nil {
		versions = sources.Versions()
	}
	s, err := webhooks.New(webhooks.Config{
		DB: db, Dispatcher: c.Dispatcher, Secrets: box, Resolver: OfflineResolver, Logger: logger,
		MaxWebhooks: c.MaxWebhooks, RequestTimeout: 3 * time.Second, Notices: notices.Rules{Disable: c.Disable}, TrialTime: c.TrialTime,
		Versions: versions, Clock: c.Clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
