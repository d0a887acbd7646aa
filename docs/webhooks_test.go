package docs_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/webhookd/webhookd/docs"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

var update = flag.Bool("update", false, "write docs/webhooks.yaml from the intake table")

// TestWebhooksDocumentIsCurrent: docs/webhooks.yaml is what sources generates from the table that
// validates events at intake, so the deliveries' document cannot drift from intake. With -update
// it writes the file.
func TestWebhooksDocumentIsCurrent(t *testing.T) {
	want, err := sources.WebhooksDocument()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("webhooks.yaml", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(docs.Webhooks, want) {
		t.Fatal("docs/webhooks.yaml is not what the intake table generates: run `go test ./docs -run WebhooksDocument -update`")
	}
}

// TestWebhooksDocumentIsValidOpenAPI31: kin-openapi loads and validates the document as OpenAPI
// 3.1, and it describes a delivery of every event type of both variants, webhook.test included,
// and every notice an operational webhook receives, notice.test included, each with the Standard
// Webhooks headers.
func TestWebhooksDocumentIsValidOpenAPI31(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.Webhooks)
	if err != nil {
		t.Fatalf("load webhooks.yaml: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("webhooks.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("webhooks.yaml is not valid OpenAPI 3.1: %v", err)
	}
	var keys []string
	for _, v := range []model.Variant{model.VariantA, model.VariantB} {
		for _, typ := range append(v.EventTypes(), model.EventTest) {
			keys = append(keys, "variant-"+string(v)+"/"+typ)
		}
	}
	for _, typ := range append(model.NoticeTypes, model.NoticeTest) {
		keys = append(keys, "notice/"+typ)
	}
	for _, key := range keys {
		item := doc.Webhooks[key]
		if item == nil || item.Post == nil {
			t.Errorf("no webhooks entry %s", key)
			continue
		}
		var names []string
		for _, p := range item.Post.Parameters {
			names = append(names, strings.ToLower(p.Value.Name))
		}
		for _, h := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "x-service-event", "traceparent"} {
			if !strings.Contains(strings.Join(names, " "), h) {
				t.Errorf("%s: no %s header", key, h)
			}
		}
	}
}

const (
	beginData = "    # BEGIN generated event data\n"
	endData   = "    # END generated event data\n"
)

// TestOpenAPIEventDataIsCurrent: the event data schemas that POST <prefix>/events takes in
// docs/openapi.yaml are the ones sources generates from the intake table (OpenAPI 3.0 dialect),
// so a typed client publishes exactly what intake accepts. With -update it writes the block.
func TestOpenAPIEventDataIsCurrent(t *testing.T) {
	want, err := sources.DataComponents()
	if err != nil {
		t.Fatal(err)
	}
	doc := string(docs.OpenAPI)
	begin, end := strings.Index(doc, beginData), strings.Index(doc, endData)
	if begin < 0 || end < begin {
		t.Fatal("docs/openapi.yaml has no generated event data block")
	}
	got := doc[begin+len(beginData) : end]
	if *update {
		if err := os.WriteFile("openapi.yaml", []byte(doc[:begin+len(beginData)]+string(want)+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(want) {
		t.Fatal("docs/openapi.yaml's event data is not what the intake table generates: run `go test ./docs -run OpenAPIEventData -update`")
	}
}
