package worker_test

import (
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/worker/temporaltest"
)

func TestMain(m *testing.M) { dbtest.Main(m, temporaltest.Stop) }
