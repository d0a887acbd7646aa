//go:build !integration

package api_test

// integrationTier: the hermetic tier, without Temporal, cannot show a retry accepted.
const integrationTier = false
