package worker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/worker/temporaltest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, temporaltest.Stop, func() {
		if built.path != "" {
			_ = os.RemoveAll(filepath.Dir(built.path))
		}
	})
}
