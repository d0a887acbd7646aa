package model_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestDataAtCostsNothingForOneVersion: while an event's data and a webhook's version agree (every
// delivery today: every type has one version), DataAt gives the data as it is, decoding nothing
// and allocating nothing; asking for a newer version than the data's gives it as written; without
// a table of versions nothing can be converted down.
func TestDataAtCostsNothingForOneVersion(t *testing.T) {
	data := json.RawMessage(`{"a":1}`)
	allocs := testing.AllocsPerRun(100, func() {
		got, err := model.DataAt(nil, "campaign.created", data, 1, 1)
		if err != nil || &got[0] != &data[0] {
			t.Fatal("the data was not given as it is")
		}
	})
	if allocs != 0 {
		t.Fatalf("DataAt with one version allocated %v times", allocs)
	}
	if got, err := model.DataAt(nil, "campaign.created", data, 1, 2); err != nil || string(got) != string(data) {
		t.Fatalf("asked for a newer version: %s, %v", got, err)
	}
	if n := model.LatestVersion(nil, "campaign.created"); n != 1 {
		t.Fatalf("latest version without a table: %d", n)
	}
	if _, err := model.DataAt(nil, "campaign.created", data, 2, 0); err != nil {
		t.Fatalf("version 0 is the data as written: %v", err)
	}
	if _, err := model.DataAt(nil, "campaign.created", data, 2, -1); !errors.Is(err, model.ErrNoVersion) {
		t.Fatalf("version -1: %v", err)
	}
	if _, err := model.DataAt(nil, "campaign.created", data, 2, 1); err == nil {
		t.Fatal("converted down without a table")
	}
	// A webhook receives its own version of its type, and any other type as written.
	w := &model.Webhook{EventType: "campaign.created", Version: 1}
	if w.VersionOf("campaign.created") != 1 || w.VersionOf(model.EventTest) != 0 {
		t.Fatalf("VersionOf: %d, %d", w.VersionOf("campaign.created"), w.VersionOf(model.EventTest))
	}
}
