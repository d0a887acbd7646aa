//go:build integration

package api_test

// integrationTier: the tests run with Temporal and PostgreSQL (build tag integration).
const integrationTier = true
