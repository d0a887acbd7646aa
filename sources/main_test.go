package sources_test

import (
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// forEachBackend runs fn on every database backend of this run.
var forEachBackend = dbtest.ForEach
