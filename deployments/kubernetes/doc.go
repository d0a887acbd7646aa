// Package kubernetes holds webhookd's Kubernetes manifests. It is a module of its own so that the
// test that checks them (kubeconform against the upstream OpenAPI schema) keeps its dependencies
// out of webhookd's go.mod; `make test` runs it.
package kubernetes
