package model_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestSQLiteSynchronous: a sqlite: URL takes synchronous=normal (the default) or full, and the
// connection runs with that setting (PRAGMA synchronous: 1 is NORMAL, 2 FULL); any other option
// or value is refused, naming it.
func TestSQLiteSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		options string
		want    int
	}{{"", 1}, {"?synchronous=normal", 1}, {"?synchronous=full", 2}, {"?synchronous=FULL", 2}} {
		db, err := model.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "w.db")+tc.options)
		if err != nil {
			t.Fatalf("%q: %v", tc.options, err)
		}
		var got int
		if err := db.NewRaw("PRAGMA synchronous").Scan(ctx, &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q: synchronous = %d, want %d", tc.options, got, tc.want)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"?synchronous=off", "?synchronous=full&synchronous=normal", "?cache=shared", "?%zz"} {
		_, err := model.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "w.db")+bad)
		if err == nil || !strings.Contains(err.Error(), "database url") {
			t.Errorf("%q: %v, want a refusal", bad, err)
		}
	}
}
