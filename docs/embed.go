// Package docs holds the documentation for users and operators of webhookd. The OpenAPI document
// is embedded so the binary serves the reference that matches the code it was built from.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, served at GET /openapi.yaml and used by the handler tests to
// validate every response they receive.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Webhooks is docs/webhooks.yaml, the OpenAPI 3.1 document of the deliveries (generated from the
// intake table by package sources), served at GET /openapi-webhooks.yaml.
//
//go:embed webhooks.yaml
var Webhooks []byte
