// Package readiness says whether webhookd's dependencies answer: the database, which intake and
// management need, and Temporal, which the outbox can wait for. The API's /readyz and its
// dependency gauge read Check; the API's and the portal's error mappers ask DatabaseUp to tell an
// outage (503, retry later) from a defect (500). cmd/webhookd builds one Checker and hands it to
// both, so that neither holds the database or the Temporal client for it.
package readiness

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/webhookd/webhookd/model"
)

// The states Check reports of each dependency.
const (
	OK          = "ok"
	Unavailable = "unavailable"
)

// Checker asks the dependencies whether they answer.
type Checker struct {
	db       *model.DB
	temporal client.Client
	log      *slog.Logger
}

// New builds a Checker. temporal may be nil (an API without a Temporal client): Check then
// reports it unavailable.
func New(db *model.DB, temporal client.Client, log *slog.Logger) (*Checker, error) {
	if db == nil {
		return nil, errors.New("readiness: DB is required")
	}
	if log == nil {
		log = slog.Default()
	}
	return &Checker{db: db, temporal: temporal, log: log}, nil
}

// Check asks the database and Temporal whether they answer: OK or Unavailable each, the cause
// logged.
func (c *Checker) Check(ctx context.Context) (database, temporal string) {
	database, temporal = OK, OK
	if err := c.db.PingContext(ctx); err != nil {
		c.log.Warn("readiness: database", "err", err)
		database = Unavailable
	}
	if c.temporal == nil {
		temporal = Unavailable
	} else if _, err := c.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		c.log.Warn("readiness: temporal", "err", err)
		temporal = Unavailable
	}
	return database, temporal
}

// DatabaseUp says whether the database answers a query within a second, even when ctx (a
// request's, which may have ended with the failure being judged) is done.
func (c *Checker) DatabaseUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	var probe int
	return c.db.NewRaw("SELECT 1").Scan(ctx, &probe) == nil
}
