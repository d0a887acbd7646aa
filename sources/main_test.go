package sources_test

import (
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// forEachBackend runs fn on every database backend of this run (dbtest.Backends).
func forEachBackend(t *testing.T, fn func(t *testing.T, db *model.DB)) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) { fn(t, b.Open(t)) })
	}
}
