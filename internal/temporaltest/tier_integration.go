//go:build integration || e2e || record

package temporaltest

// serverTier is true in the integration, system and recording runs, which need a real server.
const serverTier = true
