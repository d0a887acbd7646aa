// Package docs holds the documentation for users and operators of webhookd. The OpenAPI document
// is embedded so the binary serves the reference that matches the code it was built from.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml, served at GET /openapi.yaml and used by the handler tests to
// validate every response they receive.
//
//go:embed openapi.yaml
var OpenAPI []byte
