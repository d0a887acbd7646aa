//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m, temporaltest.Stop, func() {
		if built.path != "" {
			_ = os.RemoveAll(filepath.Dir(built.path))
		}
	})
}
