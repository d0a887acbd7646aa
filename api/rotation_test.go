package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
)

// TestSecondRotationKeepsFirstOverlap (issue 8, #5): rotating twice within the overlap keeps both
// rotated-out secrets, each until the previousSecretExpiresAt its own rotation answered; once
// model.MaxPreviousSecrets still sign, a further rotation is 409 conflict and changes nothing.
func TestSecondRotationKeepsFirstOverlap(t *testing.T) {
	box, err := secretbox.New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		ctx := context.Background()
		key := newKey(t, e.db)
		auth := v.auth(key)
		created := e.do(t, "POST", v.collection, auth, createBody("https://x.example.com/", v.eventType)).data(t)
		id := int64(created["id"].(float64))
		one := fmt.Sprintf("%s/%d", v.collection, id)
		s1 := created["secret"].(string)

		rotate := func() (secret string, expires time.Time) {
			t.Helper()
			r := e.do(t, "POST", one+"/secret/rotate", auth, "")
			r.expect(t, 200, "")
			d := r.data(t)
			expires, err := time.Parse(time.RFC3339Nano, d["previousSecretExpiresAt"].(string))
			if err != nil {
				t.Fatal(err)
			}
			return d["secret"].(string), expires
		}
		s2, e1 := rotate()
		s3, e2 := rotate()
		if e2.Before(e1) || e1.Before(time.Now().Add(23*time.Hour)) {
			t.Fatalf("previousSecretExpiresAt = %v then %v", e1, e2)
		}

		prev, err := model.ListPreviousSecrets(ctx, e.db, id)
		if err != nil {
			t.Fatal(err)
		}
		type kept struct {
			secret  string
			expires time.Time
		}
		var got []kept
		for _, p := range prev {
			plain, err := box.Open(p.Secret)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, kept{plain, p.ExpiresAt.UTC().Truncate(time.Millisecond)})
		}
		want := []kept{{s2, e2}, {s1, e1}}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("previous secrets after two rotations = %+v, want %+v", got, want)
		}
		if cur := e.do(t, "GET", one+"/secret", auth, "").data(t)["secret"]; cur != s3 {
			t.Fatalf("current secret = %v, want the second rotation's", cur)
		}

		for range model.MaxPreviousSecrets - 2 {
			rotate()
		}
		refused := e.do(t, "POST", one+"/secret/rotate", auth, "")
		refused.expectError(t, v, 409, "")
		if refused.body["code"] != "conflict" || !strings.Contains(refused.body["message"].(string), e1.Format("2006-01-02T15:04:05.000Z")) {
			t.Fatalf("refused rotation = %s, want conflict naming when the oldest secret expires", refused.raw)
		}
		if prev, _ := model.ListPreviousSecrets(ctx, e.db, id); len(prev) != model.MaxPreviousSecrets {
			t.Fatalf("a refused rotation changed the previous secrets: %d of them", len(prev))
		}
	})
}
